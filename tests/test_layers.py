"""The house by stage: the layers of .importlinter hold (import-linter: every import points down, no
runtime imports another, no import circle between the modules or packages of any package), every
module can be the first one imported, and an import made inside a function says why it is there."""

import ast
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "infer_compare"


def _lint_imports(cwd: Path) -> subprocess.CompletedProcess:
    exe = shutil.which("lint-imports", path=str(Path(sys.executable).parent)) or shutil.which("lint-imports")
    if exe is None:
        pytest.skip("import-linter is not installed (pip install -e '.[dev]')")
    return subprocess.run([exe, "--no-cache"], cwd=cwd, capture_output=True, text=True, timeout=300,
                          env={"PYTHONPATH": str(cwd), "PATH": "/usr/bin:/bin"})


def test_import_linter_contracts_hold():
    res = _lint_imports(ROOT)
    out = res.stdout + res.stderr
    assert res.returncode == 0, out[-3000:]
    assert "Contracts: 3 kept, 0 broken." in out


def test_the_contracts_catch_an_import_that_runs_up(tmp_path):
    """The same configuration on a copy of the package with one import added from base up to measure,
    and one circle inside catalog: both contracts fail and name the import."""
    copy = tmp_path / "infer_compare"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / ".importlinter", tmp_path / ".importlinter")
    with open(copy / "base" / "errors.py", "a") as f:
        f.write("\n\ndef _up():\n    from infer_compare.measure import plan  # noqa: F401\n")
    with open(copy / "catalog" / "runtimes.py", "a") as f:  # catalog/formats.py imports runtimes.py
        f.write("\n\ndef _circle():\n    from infer_compare.catalog import formats  # noqa: F401\n")
    res = _lint_imports(tmp_path)
    out = res.stdout + res.stderr
    assert res.returncode != 0
    assert "infer_compare.base.errors -> infer_compare.measure.plan" in out
    assert "No cycles are allowed in infer_compare.catalog" in out


def _modules() -> list[str]:
    out = []
    for f in sorted(PACKAGE.rglob("*.py")):
        parts = list(f.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__main__":
            continue
        out.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return out


def test_every_module_imports_first_in_a_fresh_interpreter():
    """A package whose __init__ imports a child that imports the package back fails only when one of them
    is imported first; import-linter's contracts do not see that circle, a fresh interpreter does."""
    def one(mod: str) -> tuple[str, str]:
        r = subprocess.run([sys.executable, "-c", f"import {mod}"], cwd=ROOT, capture_output=True, text=True,
                           timeout=120)
        return mod, "" if r.returncode == 0 else (r.stderr.strip().splitlines() or ["?"])[-1]

    with ThreadPoolExecutor(max_workers=4) as ex:
        bad = [f"{m}: {e}" for m, e in ex.map(one, _modules()) if e]
    assert not bad, "\n".join(bad)


def _deferred_internal_imports(path: Path):
    tree = ast.parse(path.read_text())
    for fn in ast.walk(tree):
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for node in ast.walk(fn):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("infer_compare"):
                yield node
            elif isinstance(node, ast.Import) and any(a.name.startswith("infer_compare") for a in node.names):
                yield node


def test_an_import_inside_a_function_says_why():
    """Imports of the package's own modules belong at the top; the few made inside a function (to keep the
    CLI's or a child's start light, or one of several chosen by kind) carry a comment that says so."""
    missing = []
    for path in sorted(PACKAGE.rglob("*.py")):
        lines = path.read_text().splitlines()
        for node in _deferred_internal_imports(path):
            said = "#" in " ".join(lines[node.lineno - 1:node.end_lineno])
            i = node.lineno - 2  # or a comment above the group of imports it belongs to
            while not said and i >= 0 and lines[i].strip().startswith(("#", "from ", "import ")):
                said = lines[i].strip().startswith("#")
                i -= 1
            if not said:
                missing.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert not missing, "imports inside functions without a reason: " + ", ".join(missing)


def test_no_file_of_the_package_is_ignored_by_git():
    """A package folder named like a build output (``build/``) is ignored by .gitignore: a clone would lack
    its files."""
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    files = [str(p.relative_to(ROOT)) for p in PACKAGE.rglob("*.py")]
    res = subprocess.run(["git", "check-ignore", "--no-index", *files], cwd=ROOT, capture_output=True,
                         text=True)
    assert res.stdout.strip() == "", f"ignored by .gitignore: {res.stdout}"


def test_the_package_root_holds_only_the_face():
    loose = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert loose == ["__init__.py", "__main__.py", "api.py"]


@pytest.mark.parametrize("pkg", sorted(p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists()))
def test_each_package_opens_with_what_enters_and_leaves(pkg):
    doc = ast.get_docstring(ast.parse((PACKAGE / pkg / "__init__.py").read_text())) or ""
    assert doc, f"infer_compare/{pkg}/__init__.py has no docstring"
    assert "import" in doc.lower(), f"infer_compare/{pkg}/__init__.py does not say what it may import"
