"""--output-kind on bundles (issue 24): 'export' checks it against the model's outputs and records it in
the manifest, 'run' judges parity by it (or by its own --output-kind); a kind that does not fit, or an
output the model lacks, is one line and exit 2 before any work."""

from __future__ import annotations

import json

import pytest

RUN = ["--backends", "onnxruntime", "--device", "cpu", "-b", "1", "--min-time", "0", "--min-iters", "2",
       "--warmup", "1", "--max-time", "0.2", "-q"]


@pytest.fixture(scope="module")
def bundle(cache_dir, tmp_path_factory):
    from infer_compare.cli import main

    out = tmp_path_factory.mktemp("kinds") / "lenet5"
    code = main(["export", "--model", "lenet5", "--formats", "onnx", "--precisions", "fp32",
                 "--out", str(out), "--output-kind", "output=regression", "-q"])
    assert code == 0
    return out


def test_export_records_the_kind_and_run_judges_by_it(bundle, tmp_path):
    from infer_compare.cli import main

    assert json.loads((bundle / "manifest.json").read_text())["output_kinds"] == {"output": "regression"}
    code = main(["run", str(bundle), *RUN, "-o", str(tmp_path)])
    rep = json.loads((tmp_path / "results.json").read_text())
    assert code == 0, [r.get("reason") for r in rep["rows"]]
    assert any("outputs judged as given by --output-kind: output as regression" in n for n in rep["notes"])
    (row,) = [r for r in rep["rows"] if r["status"] == "ok"]
    assert row["parity"]["kind"] == "regression"


@pytest.mark.parametrize("where", ["export", "run"])
def test_an_output_the_model_lacks_is_one_line_exit_2(where, bundle, tmp_path, capsys):
    from infer_compare.cli import main

    argv = (["export", "--model", "lenet5", "--formats", "onnx", "--precisions", "fp32",
             "--out", str(tmp_path / "b"), "-q"] if where == "export"
            else ["run", str(bundle), *RUN, "-o", str(tmp_path)])
    code = main([*argv, "--output-kind", "nope=map"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and err.startswith("infer-compare: error: --output-kind nope=map: "
                                        "the model has no output 'nope'")
    assert "\n" not in err


