"""int8 recipes against the CPU they run on: what each ONNX int8 choice does to the results here.

For each model and each recipe (scheme U8S8 / S8S8, reduce_range auto / off / on), one comparison
through the tool itself (``infer_compare.compare``: ONNX Runtime CPU fp32 and int8 on the same
held-out inputs, and OpenVINO on the same QDQ file where OpenVINO is installed), and a table of
the int8 rows' parity: accuracy (models with labels), top-1 agreement with the fp32 reference,
mean and worst-sample cosine, and what the row says ran.

    python benchmarks/int8_recipes.py --models lenet5,mobilenet_v2 --out int8-recipes.json

docs/onnx-precision.md records the figures of an AVX2-only CPU and of an AVX-512/AMX Xeon.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

RECIPES = [("U8S8", "auto"), ("U8S8", "off"), ("U8S8", "on"), ("S8S8", "off"), ("S8S8", "on")]


def _row_figures(r) -> dict:
    p = r.parity
    out = {"backend": r.backend, "format": r.format, "status": r.status, "ran": r.exec_precision,
           "reduce_range": (r.export.options or {}).get("reduce_range") if r.export else None,
           "reason": (r.export.options or {}).get("reduce_range_reason") if r.export else None}
    if p is not None:
        out.update(accuracy=p.accuracy, reference_accuracy=p.reference_accuracy, top1=p.top1_agreement,
                   cos_mean=p.cosine_mean, cos_worst=p.cosine_min, passed=p.passed, n=p.n)
    return out


def measure(model: str, scheme: str, rr: str, cache_dir: str | None, backends: list[str]) -> list[dict]:
    from infer_compare import compare

    rep = compare(model, backends=backends, formats=["onnx"], precisions=["fp32", "int8"], devices=["cpu"],
                  batch_sizes=[1], min_time_s=0.2, max_time_s=0.5, warmup_iters=1, cache_dir=cache_dir,
                  runner_options={"onnxruntime": {"int8_scheme": scheme, "int8_reduce_range": rr}})
    rows = []
    for r in rep.rows:
        if r.precision == "int8" and r.status != "skipped":
            rows.append({"model": model, "scheme": scheme, "reduce_range_option": rr, **_row_figures(r)})
    return rows


def _fmt(v, spec: str) -> str:
    return "–" if v is None else format(v, spec)


def table(rows: list[dict]) -> str:
    lines = ["| model | recipe | row | ran | accuracy | top-1 agr. | cos mean | cos worst |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        recipe = f"{r['scheme']}, reduce_range {r['reduce_range_option']}" + \
            (f" (→ {'on' if r['reduce_range'] else 'off'})" if r["reduce_range_option"] == "auto" else "")
        acc = _fmt(r.get("accuracy"), ".2%") + (f" (fp32 {r['reference_accuracy']:.2%})"
                                                 if r.get("reference_accuracy") is not None else "")
        lines.append(f"| {r['model']} | {recipe} | {r['backend']}/{r['format']} | {r['ran']} | {acc} | "
                     f"{_fmt(r.get('top1'), '.3f')} | {_fmt(r.get('cos_mean'), '.4f')} | "
                     f"{_fmt(r.get('cos_worst'), '.4f')} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", default="lenet5,mobilenet_v2")
    ap.add_argument("--backends", default="onnxruntime,openvino")
    ap.add_argument("--cache-dir")
    ap.add_argument("--out", help="write the rows and the machine's facts as JSON")
    a = ap.parse_args(argv)
    from infer_compare.catalog import deps
    from infer_compare.host.cpu_int8 import describe
    from infer_compare.host.env import cpu_info

    cpu = describe()
    facts = {"cpu": cpu_info()[0], "int8_path": cpu.to_dict(), "onnxruntime": deps.version("onnxruntime"),
             "openvino": deps.version("openvino")}
    print(f"# {facts['cpu']}: {cpu.isa} ({cpu.instruction}); onnxruntime {facts['onnxruntime']}, "
          f"openvino {facts['openvino']}", flush=True)
    rows: list[dict] = []
    for model in a.models.split(","):
        for scheme, rr in RECIPES:
            t = time.time()
            rows += measure(model, scheme, rr, a.cache_dir, a.backends.split(","))
            print(f"  {model} {scheme} reduce_range {rr}: {time.time() - t:.0f} s", file=sys.stderr,
                  flush=True)
    print(table(rows))
    if a.out:
        Path(a.out).write_text(json.dumps({"facts": facts, "rows": rows}, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
