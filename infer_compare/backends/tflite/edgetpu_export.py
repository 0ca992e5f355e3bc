"""Full-integer TFLite -> Edge TPU TFLite with Coral's ``edgetpu_compiler``.

The compiler runs with an argument list and a checked exit status (``run_tool``);
its stderr goes into the ExportError. Its operation log is parsed into op coverage
(operations mapped to the Edge TPU vs left to the CPU), recorded in the artifact's
options (``op_coverage``) and, when most operations stay on the CPU, in its notes.

``edgetpu_compiler`` exists for x86-64 Linux only (Coral's apt repository:
``apt-get install edgetpu-compiler``); where it is absent the probe says so.
"""

from __future__ import annotations

import platform
import re
import shutil
from pathlib import Path
from typing import Any

from infer_compare.backends.exporter import ExportContext, Exporter, ExportResult, run_tool
from infer_compare.backends.tflite import common
from infer_compare.backends.tflite.bindings import read_io_map, write_io_map
from infer_compare.backends.tflite.edgetpu_precheck import compare_note, precheck, precheck_summary
from infer_compare.backends.tflite.options import EdgeTpuOptions
from infer_compare.base.errors import ExportError
from infer_compare.base.records import Availability

COMPILER = "edgetpu_compiler"
HINT = ("x86-64 Linux only: add Coral's apt repository (echo 'deb https://packages.cloud.google.com/apt "
        "coral-edgetpu-stable main' | sudo tee /etc/apt/sources.list.d/coral-edgetpu.list; curl "
        "https://packages.cloud.google.com/apt/doc/apt-key.gpg | sudo apt-key add -; sudo apt-get "
        "update), then sudo apt-get install edgetpu-compiler  (see coral.ai/docs/edgetpu/compiler)")
MOSTLY_CPU = 0.5  # flag a model when more than this share of its operations runs on the CPU

_TABLE_ROW = re.compile(r"^\s*([A-Z][A-Z0-9_]*)\s+(\d+)\s+(\S.*?)\s*$")
_COUNTS = {
    "total": re.compile(r"Total number of operations:\s*(\d+)"),
    "tpu": re.compile(r"Number of operations that will run on Edge TPU:\s*(\d+)"),
    "cpu": re.compile(r"Number of operations that will run on CPU:\s*(\d+)"),
    "subgraphs": re.compile(r"Number of Edge TPU subgraphs:\s*(\d+)"),
}


_HEADER = re.compile(r"^\s*Operator\s+Count\s+Status\s*$")


def _parse_table(text: str) -> dict[str, dict[str, Any]]:
    """The rows of the FIRST operator table in ``text`` (a second table is a repeat, not more ops)."""
    ops: dict[str, dict[str, Any]] = {}
    in_table = False
    for line in text.splitlines():
        if _HEADER.match(line):
            if in_table:
                break
            in_table = True
            continue
        m = _TABLE_ROW.match(line) if in_table else None
        if not m:
            continue
        op, count, status = m.group(1), int(m.group(2)), m.group(3)
        rec = ops.setdefault(op, {"count": 0, "tpu": 0, "cpu": 0, "status": []})
        rec["count"] += count
        on_tpu = status.lower().startswith("mapped to edge tpu")
        rec["tpu" if on_tpu else "cpu"] += count
        if status not in rec["status"]:
            rec["status"].append(status)
    return ops


def parse_log(text: str, log_text: str | None = None) -> dict[str, Any]:
    """Op coverage from the compiler's output (``-s``: summary and operator table on stdout)
    and its ``*_edgetpu.log`` (the same operator table again).

    ONE operator table is read: the ``.log``'s when it has one, else the first in ``text``
    (adding both would count every operation twice). The summary counts come from ``text``.
    Returns {"ops": {op: {"count", "tpu", "cpu", "status": [...]}}, "tpu_ops", "cpu_ops",
    "total_ops", "tpu_fraction", "subgraphs", "table_from"}. The table is authoritative per
    op; the summary counts are used when there is no table.
    """
    ops = _parse_table(log_text) if log_text else {}
    table_from = "log" if ops else None
    if not ops:
        ops = _parse_table(text)
        table_from = "stdout" if ops else None
    summary = text + ("\n" + log_text if log_text else "")
    found = {k: int(m.group(1)) for k, rx in _COUNTS.items() if (m := rx.search(summary))}
    tpu = sum(r["tpu"] for r in ops.values()) if ops else found.get("tpu")
    cpu = sum(r["cpu"] for r in ops.values()) if ops else found.get("cpu")
    if tpu is None and cpu is None and "total" in found:
        # the summary omits the split when every operation is mapped
        tpu, cpu = found["total"], 0
    total = (tpu or 0) + (cpu or 0) if (tpu is not None or cpu is not None) else found.get("total")
    return {
        "ops": ops,
        "tpu_ops": tpu,
        "cpu_ops": cpu,
        "total_ops": total,
        "tpu_fraction": (tpu / total) if total and tpu is not None else None,
        "subgraphs": found.get("subgraphs"),
        "table_from": table_from,
    }


def coverage_note(cov: dict[str, Any]) -> str | None:
    """A warning when most operations run on the CPU (None otherwise)."""
    frac = cov.get("tpu_fraction")
    if frac is None or cov.get("total_ops") in (None, 0):
        return None
    if 1.0 - frac > MOSTLY_CPU:
        cpu_ops = sorted(op for op, r in cov.get("ops", {}).items() if r.get("cpu"))
        return (f"MOSTLY ON THE CPU: only {cov['tpu_ops']} of {cov['total_ops']} operations "
                "are mapped to the Edge TPU"
                + (f" (CPU: {', '.join(cpu_ops)})" if cpu_ops else ""))
    return None


def compiler_version() -> str | None:
    exe = shutil.which(COMPILER)
    if exe is None:
        return None
    try:
        out = run_tool([exe, "--version"], "edgetpu_compiler --version", timeout=30).stdout
    except ExportError:
        return None
    m = re.search(r"version\s+(\S+)", out)
    return m.group(1) if m else out.strip()[:60]


class EdgeTpuExporter(Exporter):
    format = "edgetpu"

    @classmethod
    def probe(cls) -> Availability:
        if shutil.which(COMPILER) is None:
            where = f"{platform.system()} {platform.machine()}"
            extra = "" if (platform.system(), platform.machine()) == ("Linux", "x86_64") else \
                f"; it is not built for {where}"
            return Availability(False, f"'{COMPILER}' is not on PATH{extra}", HINT)
        return Availability(True, version=compiler_version())

    @classmethod
    def cache_extras(cls, ctx: ExportContext, precision: str) -> dict:
        # rev 2: one operator table counted (rev 1 counted stdout's and the .log's), and the pre-check
        return {"edgetpu_compiler": compiler_version(), "exporter_rev": 2}

    @classmethod
    def explain_unavailable(cls, ctx: ExportContext, source: str | None, precision: str) -> str:
        """Without the compiler: the static pre-check's prediction for the int8 TFLite file."""
        if precision != "int8" or not source:
            return ""
        return precheck_summary(source)

    @classmethod
    def offline_build(cls, source_rel: str, out_dir_rel: str) -> tuple[str, str]:
        """Where the compiler is absent (everywhere but x86-64 Linux): (the file a bundle's ``run`` picks up,
        the one line that says how to make it). The compiler writes ``<stem>_edgetpu.tflite`` (and
        ``<stem>_edgetpu.log``) into its ``-o`` folder; paths are relative to the bundle's folder."""
        drop_in = f"{out_dir_rel}/{Path(source_rel).stem}_edgetpu.tflite"
        return drop_in, (
            f"Edge TPU model not compiled ({COMPILER} runs on x86-64 Linux only and was not found here): "
            f"in this bundle's folder on an x86-64 Linux host with {COMPILER} (Coral's apt repository: "
            f"apt-get install edgetpu-compiler) run `{COMPILER} -s -o {out_dir_rel} {source_rel}`, which "
            f"writes {drop_in}; copy the bundle to the device and `infer-compare run` picks it up (or run "
            "`infer-compare export` on that host)")

    def export(self, ctx: ExportContext, source: str | None, out_dir: Path, precision: str) -> ExportResult:
        if precision != "int8":
            raise ExportError(f"the Edge TPU runs full-integer int8 models only, not {precision}")
        if source is None:
            raise ExportError("the Edge TPU model is compiled from the int8 TFLite artifact, "
                              "which is missing")

        info = common.inspect_model(source)
        if not info["full_integer"]:
            raise ExportError("edgetpu_compiler needs a full-integer TFLite file; the source has "
                              + "; ".join(info["problems"]) + _said(precheck_summary(source)))
        exe = shutil.which(COMPILER)
        if exe is None:
            raise ExportError(f"'{COMPILER}' is not on PATH")
        pred, pred_error = _safe_precheck(source)
        src = out_dir / "model.tflite"
        shutil.copyfile(source, src)
        timeout = float(ctx.options_as(EdgeTpuOptions).compiler_timeout_s)
        try:
            proc = run_tool([exe, "-s", "-o", str(out_dir), str(src)], "edgetpu_compiler", timeout=timeout,
                            cwd=str(out_dir))
        except ExportError as e:  # say what the pre-check expected: often the reason in plain words
            raise ExportError(str(e) + _said(f"Edge TPU pre-check: {pred['summary']}" if pred else "")) from e
        out = out_dir / "model_edgetpu.tflite"
        if not out.exists():
            raise ExportError(f"edgetpu_compiler exited 0 but wrote no {out.name}: "
                              + "\n".join(proc.stdout.strip().splitlines()[-10:]))
        log_file = out_dir / "model_edgetpu.log"
        cov = parse_log(proc.stdout, log_file.read_text(errors="replace") if log_file.exists() else None)
        src.unlink()
        opts = {"compiler": compiler_version(), "args": ["-s"], "op_coverage": cov,
                "precheck": pred if pred else {"error": pred_error}}

        # the compiler keeps the tensors: the model's names travel with the file
        io = read_io_map(str(source))
        if io:
            opts["io_map"] = io
            write_io_map(str(out), io)
        return ExportResult(str(out), opts, coverage_notes(cov, pred))


def _said(text: str) -> str:
    return f"; {text}" if text else ""


def _safe_precheck(source: str) -> tuple[dict[str, Any] | None, str | None]:
    """(prediction, None) or (None, why there is none): the pre-check never fails an export."""
    try:
        return precheck(source), None
    except Exception as e:
        return None, f"{type(e).__name__}: {e}"


def coverage_notes(cov: dict[str, Any] | None, pred: dict[str, Any] | None) -> list[str]:
    """The row's notes: the compiler's count next to the pre-check's, and a MOSTLY-ON-THE-CPU flag."""
    notes = []
    if cov and cov.get("total_ops"):
        line = f"Edge TPU op coverage: {cov['tpu_ops']}/{cov['total_ops']} operations mapped"
        if cov.get("cpu_ops") is not None:
            line += f", {cov['cpu_ops']} on the CPU"
        if cov.get("subgraphs") is not None:
            line += f", {cov['subgraphs']} Edge TPU subgraph(s)"
        notes.append(line)
        both = compare_note(pred, cov)
        if both:
            notes.append(both)
    elif pred:
        notes.append(f"Edge TPU pre-check: {pred['summary']}")
    flag = coverage_note(cov) if cov else None
    if flag:
        notes.append(flag)
    return notes
