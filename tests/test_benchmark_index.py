"""The measurement history is indexed: every file or folder under benchmarks/results/ is listed on its index
page, and every example report under reports/ has a README naming the command that made it."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_every_benchmark_result_is_on_the_index_page():
    index = (ROOT / "benchmarks" / "results" / "README.md").read_text()
    listed = set(re.findall(r"^\| `([^`]+)`", index, re.M)) | set(re.findall(r"\]\(([^)]+)\)", index))
    missing = [p.name for p in sorted((ROOT / "benchmarks" / "results").iterdir())
               if p.name != "README.md" and p.name not in listed and p.name + "/" not in listed]
    assert not missing, f"benchmarks/results/README.md does not list: {missing}"


def test_every_example_report_says_the_command_that_made_it():
    folders = [p for p in sorted((ROOT / "reports").iterdir()) if p.is_dir()]
    assert 0 < len(folders) < 20
    for d in folders:
        readme = d / "README.md"
        assert readme.is_file(), f"reports/{d.name} has no README.md"
        assert re.search(r"^\s*infer-compare ", readme.read_text(), re.M), \
            f"reports/{d.name}/README.md names no command"
    assert [p.name for p in (ROOT / "reports").iterdir() if p.is_file()] == ["README.md"]
