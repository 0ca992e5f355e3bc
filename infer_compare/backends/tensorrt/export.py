"""ONNX -> serialized TensorRT engine: one code path for TensorRT 10.x and 11.x.

Precision lives in the ONNX artifact, not in builder flags. The network is strongly
typed (``NetworkDefinitionCreationFlag.STRONGLY_TYPED`` where the flag exists; TensorRT
11 builds nothing else), so every tensor keeps the type the ONNX file gives it:

fp32  the fp32 ONNX, ``BuilderFlag.TF32`` cleared (TensorRT enables TF32 by default);
tf32  the fp32 ONNX, ``BuilderFlag.TF32`` set;
fp16  the fp16 ONNX (converted from the fp32 file by the ONNX exporter), TF32 cleared;
int8  the QDQ ONNX (static quantization with onnxruntime.quantization on the real
      calibration images): TensorRT's explicit quantization follows its
      QuantizeLinear/DequantizeLinear nodes; the layers they leave in float keep the
      ONNX types (TF32 cleared). No calibrator, no FP16/INT8 builder flags (gone in 11).

Optimization profiles: by default one per measured batch (``ctx.batch_sizes["cuda"]``;
min = opt = max = that batch), so each row runs kernels chosen for its own batch and
the runner selects the profile whose opt is its batch. With the option ``opt_batch``
N > 0, one profile 1..max batch tuned for N instead. The manifest's ``profiles`` and
``profile_mode`` say which.

Builder options come from the tensorrt runner's declared options
(``ctx.options_as(TensorRTOptions)``: ``--tensorrt-workspace``,
``runner_options={"tensorrt": {...}}``) and are part of the cache key. The builder's
timing cache is kept under the cache root (``ctx.cache_root``/tensorrt-timing/), one
file per TensorRT version and GPU. ``ProfilingVerbosity.DETAILED`` makes the layer
information that the runner summarises (layers.py) complete.

Engines do not move between GPUs or TensorRT versions: the cache key holds the
TensorRT version, the GPU name and its compute capability.

TensorRT itself has never run on the machines this was written on (no full TensorRT
wheel reaches them): the code follows TensorRT's documented Python API, is
type-checked against tensorrt-stubs 10.13, and every TensorRT name it uses is checked
against the names bound in TensorRT 11.4's bindings (tests/test_tensorrt_static.py).
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from infer_compare.backends.exporter import ExportContext, Exporter, ExportResult
from infer_compare.backends.tensorrt.common import TrtLog, first_gpu, slug, trt_status
from infer_compare.backends.tensorrt.options import TensorRTOptions
from infer_compare.base.batches import is_multi
from infer_compare.base.cache import default_root
from infer_compare.base.errors import BackendUnavailable, ExportError
from infer_compare.base.records import Availability
from infer_compare.catalog import deps

if TYPE_CHECKING:  # the annotations below are checked against tensorrt-stubs
    import tensorrt as trt

ENGINE_FILE = "model.engine"
PRECISIONS = ("fp32", "tf32", "fp16", "int8")


def plan_profiles(batches: tuple[int, ...], max_batch: int,
                  opt_batch: int) -> tuple[str, list[tuple[int, int, int]]]:
    """(mode, [(min, opt, max) batch of each profile]) -- see the module docstring."""
    mx = max(1, int(max_batch), *[int(b) for b in batches])
    if opt_batch > 0:
        return f"one profile 1..{mx} tuned for batch {min(opt_batch, mx)} (option opt_batch)", \
            [(1, min(int(opt_batch), mx), mx)]
    measured = sorted({int(b) for b in batches if int(b) >= 1})
    if measured:
        return "one profile per measured batch (min = opt = max)", [(b, b, b) for b in measured]
    return f"one profile 1..{mx} tuned for batch {mx} (no measured batches given)", [(1, mx, mx)]


def _profiles(ctx: ExportContext) -> tuple[str, list[tuple[int, int, int]]]:
    o = ctx.options_as(TensorRTOptions)
    return plan_profiles(tuple(ctx.batch_sizes.get("cuda", ())), ctx.max_batch, int(o.opt_batch))


class TensorRTExporter(Exporter):
    format = "tensorrt"

    @classmethod
    def probe(cls) -> Availability:
        trt, why, v = trt_status()
        if trt is None:
            return Availability(False, why, deps.hint("tensorrt"), version=v)
        gpu = first_gpu()
        if gpu is None:
            return Availability(False, "TensorRT builds engines on an NVIDIA GPU; none was found", version=v)
        return Availability(True, version=v, details={"gpu": gpu.get("name")})

    @classmethod
    def cache_extras(cls, ctx: ExportContext, precision: str) -> dict[str, Any]:
        _, _, v = trt_status()
        gpu = first_gpu() or {}
        o = ctx.options_as(TensorRTOptions)
        mode, profiles = _profiles(ctx)
        return {"tensorrt": v, "gpu": gpu.get("name"), "compute_capability": gpu.get("compute_capability"),
                "profiles": [list(p) for p in profiles], "workspace_mib": int(o.workspace_mib),
                "builder_optimization_level": int(o.builder_optimization_level), "strongly_typed": True,
                "tf32": precision == "tf32", "exporter_rev": 2}

    def export(self, ctx: ExportContext, source: str | None, out_dir: Path, precision: str) -> ExportResult:
        trt, why, v = trt_status()
        if trt is None:
            raise BackendUnavailable(why, deps.hint("tensorrt"))
        if source is None:
            raise ExportError(f"a TensorRT {precision} engine is built from the {precision} ONNX artifact, "
                              "which is missing")
        if precision not in PRECISIONS:
            raise ExportError(f"TensorRT engines here are {', '.join(PRECISIONS)}, not {precision}")
        if precision == "int8":
            check_symmetric_int8(source)
        return build_engine(ctx, source, out_dir, precision)


def check_symmetric_int8(source: str) -> None:
    """TensorRT takes only symmetric int8 Q/DQ (int8 zero points of 0): a uint8 file (ONNX Runtime's U8S8
    default for CPUs) is refused here with the way out, before any TensorRT work. Needs only onnx."""
    try:
        import onnx
    except ImportError:
        return
    try:
        m = onnx.load(source, load_external_data=False)
    except Exception:  # unreadable here: the ONNX parser says why when the engine is built
        return
    inits = {t.name: t for t in m.graph.initializer}
    for n in m.graph.node:
        if n.op_type == "QuantizeLinear" and len(n.input) > 2 and n.input[2] in inits:
            if inits[n.input[2]].data_type == onnx.TensorProto.UINT8:
                raise ExportError(f"the int8 ONNX {source} quantizes activations to uint8 (ONNX "
                                  "Runtime's U8S8 scheme, fast on CPUs); TensorRT needs symmetric int8: "
                                  "rebuild it with --onnx-int8-scheme S8S8")


def parse_network(builder: trt.Builder, source: str,
                  log: TrtLog) -> tuple[trt.INetworkDefinition, dict[str, Any]]:
    """The strongly typed network of the ONNX file, and what was learnt about it."""
    import tensorrt as trt

    flags = 0
    if hasattr(trt.NetworkDefinitionCreationFlag, "STRONGLY_TYPED"):
        flags = 1 << int(trt.NetworkDefinitionCreationFlag.STRONGLY_TYPED)
    network = builder.create_network(flags)
    parser = trt.OnnxParser(network, log.logger)
    if not parser.parse_from_file(str(source)):  # reads external weights (.onnx.data) beside the file
        errs = [str(parser.get_error(i)) for i in range(parser.num_errors)]
        raise ExportError(f"TensorRT's ONNX parser rejected {source}: {'; '.join(errs[:5]) or log.tail()}")
    qdq = sum(1 for i in range(network.num_layers)
              if network.get_layer(i).type in (trt.LayerType.QUANTIZE, trt.LayerType.DEQUANTIZE))
    info = {"network_flags": "STRONGLY_TYPED" if flags else "none (strongly typed is the only mode)",
            "input": network.get_input(0).name, "input_dtype": str(network.get_input(0).dtype),
            "output_dtype": str(network.get_output(0).dtype), "qdq_layers": qdq,
            # every input and output by name (a model with several: each bound by name at run time)
            "inputs": [{"name": t.name, "dtype": str(t.dtype),
                        "shape": [int(t.shape[j]) for j in range(len(t.shape))]}
                       for t in (network.get_input(i) for i in range(network.num_inputs))],
            "outputs": [{"name": t.name, "dtype": str(t.dtype)}
                        for t in (network.get_output(i) for i in range(network.num_outputs))]}
    return network, info


def configure(config: trt.IBuilderConfig, ctx: ExportContext, precision: str) -> dict[str, Any]:
    """Builder options (workspace, optimization level, TF32, layer information) onto ``config``."""
    import tensorrt as trt

    o = ctx.options_as(TensorRTOptions)
    config.set_memory_pool_limit(trt.MemoryPoolType.WORKSPACE, int(o.workspace_mib) * 2**20)
    config.builder_optimization_level = int(o.builder_optimization_level)
    config.profiling_verbosity = trt.ProfilingVerbosity.DETAILED
    if not hasattr(trt.BuilderFlag, "TF32"):
        tf32 = "no TF32 builder flag in this TensorRT: not set, not cleared"
    elif precision == "tf32":
        config.set_flag(trt.BuilderFlag.TF32)
        tf32 = "on (BuilderFlag.TF32 set)"
    else:
        config.clear_flag(trt.BuilderFlag.TF32)
        tf32 = "off (BuilderFlag.TF32 cleared; TensorRT's default is on)"
    return {"workspace_mib": int(o.workspace_mib),
            "builder_optimization_level": int(o.builder_optimization_level),
            "tf32": tf32, "profiling_verbosity": "DETAILED"}


def input_dims(ctx: ExportContext, inputs: list[dict[str, Any]]) -> list[tuple[str, list[int], bool]]:
    """(name, the shape of one sample, whether its axis 0 is the batch) of every network input: the
    network's static sizes, its dynamic ones (``-1``) from the calibration inputs (one array per input name;
    the first input's from ``ctx.input_shape``); axis 0 is the batch where the network leaves it dynamic."""
    calib = ctx.calibration if is_multi(ctx.calibration) else {}
    out = []
    for i, t in enumerate(inputs):
        net = [int(d) for d in t["shape"]]
        batched = bool(net) and net[0] == -1
        given = list(calib[t["name"]].shape[1:]) if t["name"] in calib else (
            [int(v) for v in ctx.input_shape] if i == 0 else [])
        rest = net[1:] if batched else net
        if len(given) == len(rest):
            rest = [g if d == -1 else d for d, g in zip(rest, given, strict=True)]
        if any(d == -1 for d in rest):
            raise ExportError(f"TensorRT input '{t['name']}' {net}: a dynamic size other than the "
                              "batch and no calibration input of that name to size it (give "
                              "--input-shape or --data)")
        out.append((t["name"], [int(d) for d in rest], batched))
    return out


def add_profiles(builder: trt.Builder, config: trt.IBuilderConfig, ctx: ExportContext,
                 inputs: list[dict[str, Any]]) -> dict[str, Any]:
    """One optimization profile per planned batch range, setting every input by name (inputs without a
    batch axis keep their one shape)."""
    import tensorrt as trt

    mode, plan = _profiles(ctx)
    dims = input_dims(ctx, inputs)
    out = []
    for mn, opt, mx in plan:
        profile = builder.create_optimization_profile()
        for name, rest, batched in dims:
            if batched:
                profile.set_shape(name, trt.Dims([mn, *rest]), trt.Dims([opt, *rest]), trt.Dims([mx, *rest]))
            else:
                profile.set_shape(name, trt.Dims(rest), trt.Dims(rest), trt.Dims(rest))
        config.add_optimization_profile(profile)
        out.append({"min": mn, "opt": opt, "max": mx})
    return {"profile_mode": mode, "profiles": out,
            "profile_inputs": {n: (["batch", *r] if b else r) for n, r, b in dims}}


def timing_cache_path(ctx: ExportContext, trt_version: str) -> Path:
    root = Path(ctx.cache_root or default_root())
    gpu = first_gpu() or {}
    name = slug(f"trt{trt_version}-{gpu.get('name', 'gpu')}-sm{gpu.get('compute_capability', '')}")
    return root / "tensorrt-timing" / f"{name}.cache"


def load_timing_cache(config: trt.IBuilderConfig, path: Path) -> dict[str, Any]:
    data = path.read_bytes() if path.is_file() else b""
    config.set_timing_cache(config.create_timing_cache(data), False)
    return {"path": str(path), "reused": bool(data)}


def save_timing_cache(config: trt.IBuilderConfig, path: Path) -> str | None:
    """Keep the tactics measured in this build for the next one (atomic replace); a note on failure."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".tmp{os.getpid()}")
        with open(tmp, "wb") as f:
            f.write(config.get_timing_cache().serialize())
        os.replace(tmp, path)
    except OSError as e:
        return f"the timing cache was not saved: {e}"
    return None


def build_engine(ctx: ExportContext, source: str, out_dir: Path, precision: str) -> ExportResult:
    import tensorrt as trt

    log = TrtLog()
    version = str(trt.__version__)
    builder = trt.Builder(log.logger)
    network, info = parse_network(builder, source, log)
    if precision == "int8" and not info["qdq_layers"]:
        raise ExportError(f"the int8 ONNX {source} has no QuantizeLinear/DequantizeLinear nodes: a "
                          "strongly typed TensorRT network would run it in float, not int8")
    config = builder.create_builder_config()
    opts: dict[str, Any] = {"tensorrt": version, "source_onnx": str(source), **info,
                            **configure(config, ctx, precision),
                            **add_profiles(builder, config, ctx, info["inputs"])}
    tc_path = timing_cache_path(ctx, version)
    opts["timing_cache"] = load_timing_cache(config, tc_path)
    ctx.log(f"building the TensorRT {precision} engine (TensorRT {version}, {len(opts['profiles'])} "
            f"profile(s): {opts['profile_mode']}) ...")
    t0 = time.perf_counter()
    serialized = builder.build_serialized_network(network, config)
    if serialized is None:
        raise ExportError(f"TensorRT failed to build the {precision} engine: {log.tail() or 'no message'}")
    opts["build_s"] = round(time.perf_counter() - t0, 2)
    engine_path = out_dir / ENGINE_FILE
    with open(engine_path, "wb") as f:
        f.write(serialized)
    notes = [f"strongly typed network from the {precision if precision != 'tf32' else 'fp32'} ONNX; "
             f"TF32 {opts['tf32'].split(' (')[0]}; {opts['profile_mode']}"]
    note = save_timing_cache(config, tc_path)
    if note:
        notes.append(note)
    return ExportResult(str(engine_path), opts, notes)
