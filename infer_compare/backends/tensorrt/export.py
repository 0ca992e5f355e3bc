"""ONNX -> serialized TensorRT engine with ``tensorrt.Builder`` and ``OnnxParser``.

fp32  TF32 tactics off (``BuilderFlag.TF32`` cleared: TensorRT enables it by default);
fp16  ``BuilderFlag.FP16`` on the fp32 ONNX;
int8  ``BuilderFlag.INT8`` (+ FP16 for layers without int8 kernels, as ``trtexec
      --best`` does) calibrated by an ``IInt8EntropyCalibrator2`` on the same real
      calibration images as every other int8 format (``ExportContext.calibration``).
      TensorRT 10.1+ marks this implicit quantization as deprecated (explicit Q/DQ
      through NVIDIA ModelOpt is its successor); it still builds.

One optimization profile covers batch 1..``ctx.max_batch`` (the largest requested
batch); its opt shape is ``ctx.opt_batch`` when > 1, else the option
``tensorrt_opt_batch``, else ``max_batch`` (throughput first; say which in the
manifest). The builder's timing cache is kept on disk in the cache root, one file per
TensorRT version and GPU, so later builds on the same GPU reuse the measured tactics.
Engines do not move between GPUs or TensorRT versions: the cache key holds the
TensorRT version, the GPU name and its compute capability.

Works with TensorRT 8.5/8.6 (JetPack 5) and 10.x (JetPack 6, x86-64): explicit-batch
networks need a creation flag before TensorRT 10; ``set_memory_pool_limit`` exists
since 8.4 (``max_workspace_size`` before); ``build_serialized_network`` since 8.0.
GPU memory for calibration comes from PyTorch's CUDA allocator.

Nothing here ran on a machine with TensorRT while it was written (none was
available); it is written against TensorRT's documented Python API and type-checked
with ``tensorrt-stubs`` (tests/test_tensorrt_static.py).
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import numpy as np

from ... import deps
from ...errors import BackendUnavailable, ExportError
from ...records import Availability
from ..exporter import ExportContext, Exporter, ExportResult
from .common import _Log, _slug, first_gpu, parse_version, trt_status
from .options import TensorRTOptions

ENGINE_FILE = "model.engine"
CALIB_BATCH = 16


def calibration_batches(calib: np.ndarray, batch: int) -> list[np.ndarray]:
    """Full batches of ``batch`` calibration images (float32, contiguous); the last
    partial batch is dropped unless it would be the only one."""
    calib = np.asarray(calib, dtype=np.float32)
    if len(calib) == 0:
        raise ExportError("int8 calibration needs calibration images; none were given")
    batch = max(1, min(int(batch), len(calib)))
    n = len(calib) // batch
    return [np.ascontiguousarray(calib[i * batch:(i + 1) * batch]) for i in range(n)]


def profile_shapes(input_shape: tuple[int, ...], max_batch: int, opt_batch: int) -> tuple[tuple[int, ...], ...]:
    """(min, opt, max) shapes of the one optimization profile."""
    mx = max(1, int(max_batch))
    opt = min(max(1, int(opt_batch)), mx)
    chw = tuple(int(v) for v in input_shape)
    return (1, *chw), (opt, *chw), (mx, *chw)


def _opt_batch(ctx: ExportContext) -> int:
    if ctx.opt_batch and int(ctx.opt_batch) > 1:
        return int(ctx.opt_batch)
    if ctx.options_as(TensorRTOptions).opt_batch:
        return int(ctx.options_as(TensorRTOptions).opt_batch)
    return int(ctx.max_batch)


def _workspace_mib(ctx: ExportContext) -> int:
    return int(ctx.options_as(TensorRTOptions).workspace_mib)


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
        if not (deps.has("torch")):
            return Availability(False, "the TensorRT exporter allocates calibration buffers with PyTorch (CUDA)",
                                deps.hint("torch"), version=v)
        return Availability(True, version=v, details={"gpu": gpu.get("name")})

    @classmethod
    def cache_extras(cls, ctx: ExportContext, precision: str) -> dict[str, Any]:
        _, _, v = trt_status()
        gpu = first_gpu() or {}
        extra: dict[str, Any] = {
            "tensorrt": v, "gpu": gpu.get("name"), "compute_capability": gpu.get("compute_capability"),
            "max_batch": int(ctx.max_batch), "opt_batch": _opt_batch(ctx), "workspace_mib": _workspace_mib(ctx),
            "exporter_rev": 1,
        }
        if precision == "int8":
            extra.update(calibration_n=int(len(ctx.calibration)), calibrator="IInt8EntropyCalibrator2",
                         calib_batch=CALIB_BATCH)
        return extra

    def export(self, ctx: ExportContext, source: str | None, out_dir: Path, precision: str) -> ExportResult:
        trt, why, _ = trt_status()
        if trt is None:
            raise BackendUnavailable(why, deps.hint("tensorrt"))
        if source is None:
            raise ExportError("a TensorRT engine is built from the ONNX artifact, which is missing")
        if precision not in ("fp32", "tf32", "fp16", "int8"):
            raise ExportError(f"TensorRT engines here are fp32, tf32, fp16 or int8, not {precision}")
        return build_engine(ctx, source, out_dir, precision)


def _make_calibrator(batches: list[np.ndarray], cache_file: Path, device: str = "cuda:0") -> Any:
    import tensorrt as trt
    import torch

    class EntropyCalibrator(trt.IInt8EntropyCalibrator2):
        """Feeds the real calibration images to TensorRT, one device batch at a time."""

        def __init__(self) -> None:
            trt.IInt8EntropyCalibrator2.__init__(self)
            self.batches = batches
            self.index = 0
            self.buf = torch.empty(batches[0].shape, dtype=torch.float32, device=device)

        def get_batch_size(self) -> int:
            return int(self.batches[0].shape[0])

        def get_batch(self, names: list[str]) -> list[int]:
            if self.index >= len(self.batches):
                return []  # no more batches
            self.buf.copy_(torch.from_numpy(self.batches[self.index]))
            torch.cuda.synchronize()
            self.index += 1
            return [int(self.buf.data_ptr())]

        def read_calibration_cache(self) -> bytes | None:
            return cache_file.read_bytes() if cache_file.is_file() else None

        def write_calibration_cache(self, cache: Any) -> None:
            cache_file.write_bytes(bytes(cache))

    return EntropyCalibrator()


def _timing_cache_path(ctx: ExportContext, trt_version: str) -> Path:
    from ...cache import default_root

    root = Path(ctx.cache_root or default_root())
    gpu = first_gpu() or {}
    name = _slug(f"trt{trt_version}-{gpu.get('name', 'gpu')}-sm{gpu.get('compute_capability', '')}")
    return root / "tensorrt-timing" / f"{name}.cache"


def build_engine(ctx: ExportContext, source: str, out_dir: Path, precision: str) -> ExportResult:
    import tensorrt as trt

    log = _Log()
    version = str(trt.__version__)
    major = parse_version(version)[0]
    builder = trt.Builder(log.logger)
    flags = 0
    if major < 10:  # explicit batch is the only mode from TensorRT 10 on
        flags = 1 << int(trt.NetworkDefinitionCreationFlag.EXPLICIT_BATCH)
    network = builder.create_network(flags)
    parser = trt.OnnxParser(network, log.logger)
    data = Path(source).read_bytes()
    if not parser.parse(data, str(source)):
        errs = [str(parser.get_error(i)) for i in range(parser.num_errors)]
        raise ExportError(f"TensorRT's ONNX parser rejected {source}: {'; '.join(errs[:5]) or log.tail()}")
    if network.num_inputs != 1:
        raise ExportError(f"expected one network input, the ONNX has {network.num_inputs}")
    inp = network.get_input(0)
    config = builder.create_builder_config()
    ws = _workspace_mib(ctx) * 2**20
    if hasattr(config, "set_memory_pool_limit"):  # TensorRT >= 8.4
        config.set_memory_pool_limit(trt.MemoryPoolType.WORKSPACE, ws)
    else:
        setattr(config, "max_workspace_size", ws)  # noqa: B010  (TensorRT < 8.4; absent from 10.x stubs)
    notes: list[str] = []
    opts: dict[str, Any] = {"tensorrt": version, "workspace_mib": _workspace_mib(ctx)}
    if precision == "fp32":
        config.clear_flag(trt.BuilderFlag.TF32)
        opts["flags"] = ["(TF32 cleared)"]
    elif precision == "tf32":
        config.set_flag(trt.BuilderFlag.TF32)
        opts["flags"] = ["TF32"]
    elif precision == "fp16":
        if not builder.platform_has_fast_fp16:
            notes.append("this GPU has no fast fp16; TensorRT may keep fp32 kernels")
        config.set_flag(trt.BuilderFlag.FP16)
        opts["flags"] = ["FP16"]
    elif precision == "int8":
        if not builder.platform_has_fast_int8:
            notes.append("this GPU has no fast int8; TensorRT may keep higher-precision kernels")
        config.set_flag(trt.BuilderFlag.INT8)
        config.set_flag(trt.BuilderFlag.FP16)
        opts["flags"] = ["INT8", "FP16"]
        notes.append("int8 by TensorRT's entropy calibration (implicit quantization); layers without int8 "
                     "kernels run fp16")
    mn, opt, mx = profile_shapes(tuple(ctx.input_shape), ctx.max_batch, _opt_batch(ctx))
    profile = builder.create_optimization_profile()
    profile.set_shape(inp.name, trt.Dims(list(mn)), trt.Dims(list(opt)), trt.Dims(list(mx)))
    config.add_optimization_profile(profile)
    opts["profile"] = {"input": inp.name, "min": list(mn), "opt": list(opt), "max": list(mx)}
    calib_cache = out_dir / "calibration.cache"
    if precision == "int8":
        batches = calibration_batches(ctx.calibration, CALIB_BATCH)
        cshape = [int(v) for v in batches[0].shape]
        cprof = builder.create_optimization_profile()
        cprof.set_shape(inp.name, trt.Dims(cshape), trt.Dims(cshape), trt.Dims(cshape))
        config.set_calibration_profile(cprof)
        config.int8_calibrator = _make_calibrator(batches, calib_cache)
        opts["calibration"] = {"images": int(sum(len(b) for b in batches)), "batch": int(cshape[0]),
                               "calibrator": "IInt8EntropyCalibrator2"}
    tc_path = _timing_cache_path(ctx, version)
    tc_bytes = tc_path.read_bytes() if tc_path.is_file() else b""
    timing_cache = config.create_timing_cache(tc_bytes)
    config.set_timing_cache(timing_cache, False)
    opts["timing_cache"] = {"path": str(tc_path), "reused": bool(tc_bytes)}
    ctx.log(f"building the TensorRT {precision} engine (TensorRT {version}, profile {mn[0]}..{mx[0]}, "
            f"opt {opt[0]}) ...")
    t0 = time.perf_counter()
    serialized = builder.build_serialized_network(network, config)
    if serialized is None:
        raise ExportError(f"TensorRT failed to build the {precision} engine: {log.tail() or 'no message'}")
    opts["build_s"] = round(time.perf_counter() - t0, 2)
    engine_path = out_dir / ENGINE_FILE
    with open(engine_path, "wb") as f:
        f.write(serialized)
    try:  # keep the tactics measured in this build for the next one (atomic replace)
        tc_path.parent.mkdir(parents=True, exist_ok=True)
        tmp = tc_path.with_suffix(f".tmp{os.getpid()}")
        with open(tmp, "wb") as f:
            f.write(config.get_timing_cache().serialize())
        os.replace(tmp, tc_path)
    except OSError as e:
        notes.append(f"the timing cache was not saved: {e}")
    return ExportResult(str(engine_path), opts, notes)
