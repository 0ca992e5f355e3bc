"""What an ONNX Runtime session executes, read from its optimized graph (graph.py): the row's executed
precision, its notes and extras (the int8 recipe, the node counts per kind); shared by the CPU and CUDA
paths of run.py."""

from __future__ import annotations

import os

from infer_compare.backends.onnxruntime.graph import GraphSummary, int8_recipe, summarize
from infer_compare.backends.onnxruntime.onnx_wire import WireError, read_model
from infer_compare.catalog import deps
from infer_compare.host.cpu_int8 import describe as describe_cpu

QUANTIZED_SCAN_BYTES = 64 * 2**20  # float rows: files up to this size are scanned for integer kernels


class ExecutedGraph:
    """Mixin of OnnxRuntimeRunner: the attributes it reads (artifact, options, notes, settings, _extra,
    exec_precision) are the runner's."""

    def _quantized_in_file(self) -> None:
        """A float row of a file that is already quantized (ConvInteger, DynamicQuantizeLinear...) runs
        integer kernels whatever it is called: its node types (read without the weights) say so."""
        try:
            if os.path.getsize(self.artifact) > QUANTIZED_SCAN_BYTES:
                return  # a large file: not scanned (its int8 conversions would have said it is quantized)
            g = summarize(read_model(self.artifact))
        except (OSError, WireError, ValueError):
            return
        if g.count("integer"):
            self._describe(g, "the file's graph")

    def _read_graph(self, path: str) -> GraphSummary | None:
        """The classified graph of the file at ``path``: read with the onnx package, or without it (a
        torch-free device) from the protobuf wire format (onnx_wire): the same node types, zero-point
        types and int8 weights' range."""
        if not os.path.exists(path):
            self.notes.append("ONNX Runtime wrote no optimized graph: the executed precision is "
                              "not inspected")
            return None
        if deps.has("onnx"):
            import onnx

            model = onnx.load(path, load_external_data=False)
            if self.options.precision == "int8":
                self._recipe = int8_recipe(model)
            return summarize(model)

        try:
            wire = read_model(path)
        except (OSError, WireError) as e:
            self.notes.append(f"the executed graph was not inspected: {e}")
            return None
        if self.options.precision == "int8":
            self._recipe = int8_recipe(wire)
        self.notes.append("the executed graph was read without the onnx package "
                          "(infer_compare.backends.onnxruntime.onnx_wire): node types, zero-point types and "
                          "the int8 weights' range")
        return summarize(wire)

    def _describe(self, g: GraphSummary | None, what: str) -> None:
        """exec_precision, notes and extra from the classified graph ``g``."""
        prec = self.options.precision
        if g is None:
            self.exec_precision = f"{prec} (not inspected)"
            return
        self._extra["executed_graph"] = {"source": what, **g.to_dict()}
        if prec == "int8":
            n = g.count("integer")
            self.exec_precision = f"int8: {n} of {g.total} nodes integer" if n else "fp32: no integer kernel"
            self.notes.append(f"{what}: integer (kernels and int8 data movement): {g.describe('integer')}; "
                              f"Q/DQ: {g.describe('quantize')}; float: {self._floats(g)}")
            self._describe_cpu_int8(n)
            return
        n16, n32 = g.count("fp16"), g.count("fp32")
        # a file quantized before it came here: integer kernels whatever the row's name
        if g.count("integer"):
            n = g.count("integer")
            self.exec_precision = f"int8: {n} of {g.total} nodes integer (quantized in the file itself)"
            self.notes.append(f"{what}: the file is already quantized: integer {g.describe('integer')}; "
                              f"Q/DQ: {g.describe('quantize')}; float: {self._floats(g)}")
            return
        if not n16:
            self.exec_precision = "fp32"
            self.notes.append(f"{what}: no node computes in fp16 (the provider has no fp16 kernel for "
                              f"them: it casts to fp32): fp32 {g.describe('fp32')}; "
                              f"casts {g.describe('cast')}")
        else:
            self.exec_precision = "fp16" if not n32 else f"fp16+fp32 ({n16} of {g.total} nodes fp16)"
            self.notes.append(f"{what}: fp16 {g.describe('fp16')}; fp32 {g.describe('fp32')}; casts "
                              f"{g.describe('cast')}")

    def _describe_cpu_int8(self, n_integer: int) -> None:
        """The file's scheme and weight range, and what this CPU's integer kernels do with them
        (host/cpu_int8.py)."""
        r = getattr(self, "_recipe", None) or {}
        if not r or getattr(self, "_cuda", False):
            return
        cpu = describe_cpu()
        bits = r.get("weight_bits") or 8
        kernel = cpu.ort_kernel(r["scheme"], bits)
        self.settings["int8"] = {"executed_scheme": r["scheme"], "weight_bits": r.get("weight_bits"),
                                 "cpu_int8_path": cpu.isa, "kernels": kernel, "cpu_flags": list(cpu.flags)}
        self._extra["int8_recipe"] = {**r, "cpu": cpu.to_dict()}
        if n_integer:
            self.exec_precision += f" ({r['scheme']}, {bits}-bit weights, {cpu.isa})"
        x86 = "; on x86 ONNX Runtime runs an S8S8 file as U8S8" if cpu.arch == "x86_64" else ""
        self.notes.append(f"int8 on this CPU: executed as {r['scheme']} with {bits}-bit weights (read "
                          f"from the session's optimized graph{x86}); kernels: {kernel}")

    @staticmethod
    def _floats(g: GraphSummary) -> str:
        parts = [f"{c} {g.describe(c)}" for c in ("fp32", "fp16", "bf16") if g.count(c)]
        return "; ".join(parts) or "none"
