"""The artifact chain: every artifact a run needs, built from its source through the
content-keyed cache, once per run.

    chain = ArtifactChain(ctx, cache, model, prog)
    art = chain.get("openvino", "int8")   # builds onnx fp32 first, then the NNCF IR
    if isinstance(art, Unbuilt): ...       # skipped or export_failed, with the reason

A format's source comes from the format table (``Format.source_of``); its exporter
from ``Format.exporter_for``. A bundle seeds the chain with the artifacts it carries
(``carry``) and with what could not be built on the workstation (``mark``).
"""

from __future__ import annotations

import os
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from infer_compare.artifacts.child import ExportSpec
from infer_compare.artifacts.refusals import refusal, remember_refusal
from infer_compare.backends.exporter import ExportContext, ExportResult, file_size
from infer_compare.base import diskfull
from infer_compare.base.batches import each, is_multi, save
from infer_compare.base.cache import Cache
from infer_compare.base.errors import (
    BackendUnavailable,
    DiskFullError,
    ExportError,
    ExportRefused,
    InferCompareError,
)
from infer_compare.base.layout import named_io
from infer_compare.base.progress import Progress, phase_of
from infer_compare.base.records import EXPORT_FAILED, SKIPPED, Availability, ExportRecord, ModelInfo
from infer_compare.catalog.formats import Format, get_format
from infer_compare.catalog.runtimes import load_impl
from infer_compare.host import launch


@dataclass(frozen=True)
class Unbuilt:
    """An artifact that could not be had: ``status`` skipped (software missing) or export_failed."""

    status: str
    reason: str
    hint: str = ""
    # a skip's kind in the row: "unavailable" (software missing) or "unsupported" (this model cannot have it)
    skip_kind: str = "unavailable"


Key = tuple[str, str]  # (format, artifact precision)


@dataclass
class ModelSource:
    """What the chain builds from: the model's record, its weights file (the root
    artifact, None in a bundle) and the digest of the calibration set (int8 keys)."""

    info: ModelInfo
    weights_path: str | None = None
    weights_build_s: float = 0.0
    calibration_digest: str = ""
    spec: dict[str, Any] = field(default_factory=dict)  # models.ModelSpec.as_dict(): rebuilds the module


DEFAULT_EXPORT_TIMEOUT_S = 1800.0


@dataclass
class ArtifactChain:
    ctx: ExportContext
    cache: Cache
    model: ModelSource
    prog: Progress = field(default_factory=Progress)
    done: dict[Key, ExportRecord] = field(default_factory=dict)
    failed: dict[Key, Unbuilt] = field(default_factory=dict)
    isolated: bool = True  # each export in a child process (artifacts/child.py) with a timeout
    export_timeout_s: float = DEFAULT_EXPORT_TIMEOUT_S

    def carry(self, key: Key, rec: ExportRecord) -> None:
        """An artifact that exists already (carried in a bundle)."""
        self.done[key] = rec

    def mark(self, key: Key, why: Unbuilt) -> None:
        """An artifact known not to be available (not in the bundle, failed on the workstation)."""
        self.failed[key] = why

    def get(self, fmt: str, prec: str) -> ExportRecord | Unbuilt:
        """The artifact of (format, artifact precision), building its sources first."""
        key = (fmt, prec)
        if key not in self.done and key not in self.failed:
            got = self._make(get_format(fmt), prec)
            if isinstance(got, Unbuilt):
                self.failed[key] = got
            else:
                self.done[key] = got
        return self.done.get(key) or self.failed[key]

    def explain(self, fmt: str, prec: str) -> str:
        """What the exporter of (format, precision) can say without building it (e.g. the Edge TPU
        pre-check), when its source artifact exists in this run already; "" otherwise."""
        f = get_format(fmt)
        src_key = f.source_of(prec)
        src = self.done.get(src_key) if src_key is not None else None
        if src is None:  # a source known not to be had says why (a float TFLite root: why not the Edge TPU)
            if (fmt, prec) in self.done or (f.root_source is not None and f.root_source in self.done):
                return ""  # carried (the user's own file), or built from the run's root
            why = self.failed.get(src_key) if src_key is not None else None
            return f"needs the {src_key[0]} {src_key[1]} artifact: {why.reason}" if why and src_key else ""
        try:
            ecls = load_impl(f.exporter_for(prec))
        except (ImportError, AttributeError):
            return ""
        return _explain(ecls, self.ctx.for_format(f), src.path, prec)

    def _make(self, f: Format, prec: str) -> ExportRecord | Unbuilt:
        src_key = f.source_of(prec)
        if src_key is None:
            return self._root(f, prec)
        src = self.get(*src_key)
        if isinstance(src, Unbuilt) and f.root_source is not None and f.root_source in self.done:
            src_key, src = f.root_source, self.done[f.root_source]  # the run's root (an ONNX model)
        if isinstance(src, Unbuilt):
            return Unbuilt(src.status, f"needs the {src_key[0]} {src_key[1]} artifact: "
                                       f"{src.reason}", src.hint)
        try:
            ecls = load_impl(f.exporter_for(prec))
        except (ImportError, AttributeError) as e:
            return Unbuilt(SKIPPED, f"the {f.name} exporter is not available in this build "
                                    f"({type(e).__name__}: {e})")
        fctx = self.ctx.for_format(f)
        av = _safe(lambda: ecls.probe(), "exporter probe")
        if not av.available:
            more = _explain(ecls, fctx, src.path, prec)
            return Unbuilt(SKIPPED,
                           f"cannot build {f.title}: {av.reason}" + (f"; {more}" if more else ""), av.hint)
        no = _safe(lambda: ecls.declines(fctx, prec), "exporter check") if fctx.model is not None else None
        if isinstance(no, Availability):  # the check itself failed: let the export say what is wrong
            no = None
        if no is not None:
            return Unbuilt(SKIPPED, f"cannot build {f.title} {prec}: {no.reason}", no.hint)
        return self._build(f, prec, ecls, fctx, src)

    def _root(self, f: Format, prec: str) -> ExportRecord | Unbuilt:
        m = self.model
        if m.weights_path is None:
            return Unbuilt(SKIPPED, "no PyTorch weights file in this run")
        return ExportRecord(f.name, prec, m.weights_path, os.path.getsize(m.weights_path), m.weights_build_s,
                            True, key=m.info.weights_hash, notes=(f"weights: {m.info.weights}",))

    def cache_parts(self, f: Format, prec: str, ecls: Any, fctx: ExportContext,
                    src: ExportRecord) -> dict[str, Any]:
        """Everything that changes the artifact: its cache key."""
        info = self.model.info
        parts = {"format": f.name, "precision": prec, "model": info.name, "weights": info.weights_hash,
                 "input": list(info.input_shape), "dtype": "float32", "source": src.key,
                 **ecls.cache_extras(fctx, prec)}
        if prec == "int8":
            parts["calibration"] = self.model.calibration_digest
        if named_io(info):  # several inputs or outputs: their names, shapes and dtypes
            parts["io"] = {"inputs": [dict(i) for i in info.inputs],
                           "outputs": [dict(o) for o in info.outputs]}
        return parts

    def _full(self, e: BaseException, f: Format, prec: str) -> str:
        """The row's reason when the build failed for lack of space (whatever the exporter's words), else
        ''."""
        if isinstance(e, DiskFullError):  # the cache said it: where, and the library's words
            return f"{f.title} {prec} export failed: {e}"
        full = diskfull.reason(e, (getattr(self.cache, "root", None), tempfile.gettempdir()))
        if not full:
            return ""
        said = " ".join(str(e).split())[:200]
        return f"{f.title} {prec} export failed: {full}" + (f" (the exporter said: {said})" if said else "")

    def _build(self, f: Format, prec: str, ecls: Any, fctx: ExportContext,
               src: ExportRecord) -> ExportRecord | Unbuilt:
        def build(tmp: Path) -> dict:
            self.prog.log(f"exporting {f.title} {prec} ...")
            with phase_of(self.prog, f"exporting {f.title} {prec}"):
                if self.isolated:
                    res = isolated_export(f, prec, fctx, src, tmp, self.model, self.export_timeout_s)
                else:
                    res = ecls().export(fctx, src.path, tmp, prec)
            return {"file": inside(res.path, tmp), "options": res.options, "notes": res.notes,
                    "format": f.name, "precision": prec, "model": self.model.info.name, "source": src.path}

        t0 = time.perf_counter()
        parts = self.cache_parts(f, prec, ecls, fctx, src)
        refused = refusal(self.cache, f.name, parts)
        if refused:  # the same file and converter versions: the same refusal (--no-cache tries again)
            self.prog.log(f"{f.title} {prec}: refused before ({refused.get('created', '?')}), not "
                          "converted again")
            return Unbuilt(EXPORT_FAILED, f"{refused['reason']} (remembered from "
                                          f"{refused.get('created', '?')}; a new converter version or "
                                          "--no-cache tries again)")
        try:
            entry = self.cache.get_or_build(f.name, parts, build)
        except BackendUnavailable as e:
            return Unbuilt(SKIPPED, f"cannot build {f.title} {prec}: {e.reason}", e.hint)
        except ExportRefused as e:
            remember_refusal(self.cache, f.name, parts, str(e))
            return Unbuilt(EXPORT_FAILED, str(e))
        except InferCompareError as e:
            return Unbuilt(EXPORT_FAILED, self._full(e, f, prec) or str(e))
        except Exception as e:  # an exporter bug or converter crash is a failed row, not a crashed run
            msg = (str(e).strip().splitlines() or [""])[0]
            return Unbuilt(EXPORT_FAILED, self._full(e, f, prec)
                           or f"{f.title} {prec} export failed: {type(e).__name__}: {msg[:300]}")
        path = str(entry.path / entry.manifest["file"])
        self.prog.log(f"{f.title} {prec}: reused from the cache ({entry.path})" if entry.hit
                      else f"{f.title} {prec}: exported in {time.perf_counter() - t0:.1f} s")
        return ExportRecord(f.name, prec, path, file_size(path), float(entry.manifest.get("build_s", 0.0)),
                            entry.hit, key=entry.manifest.get("key", ""), source=src.path,
                            options=entry.manifest.get("options", {}),
                            notes=tuple(entry.manifest.get("notes", ())))


def _safe(probe: Any, what: str) -> Availability:
    try:
        return probe()
    except Exception as e:  # a probe must never take the run down
        return Availability(False, f"{what} failed: {type(e).__name__}: {e}")


def _explain(ecls: Any, ctx: ExportContext, source: str, prec: str) -> str:
    try:
        return ecls.explain_unavailable(ctx, source, prec)
    except Exception as e:  # an explanation must never take the run down
        return f"(pre-check failed: {type(e).__name__}: {e})"


def _export_spec(f: Format, prec: str, ctx: ExportContext, src: ExportRecord, out: Path, model: ModelSource,
                 work: Path) -> Any:
    import numpy as np

    calib = None
    if ctx.calibration is not None:
        calib = str(work / ("calibration.npz" if is_multi(ctx.calibration) else "calibration.npy"))
        save(calib, each(ctx.calibration, np.ascontiguousarray))
    # built from the weights: needs the module
    from_root = get_format(src.format).source_of(src.precision) is None
    return ExportSpec(
        exporter=f.exporter_for(prec), precision=prec, source=src.path, out_dir=str(out),
        model_spec=dict(model.spec) if from_root and model.spec else {}, calibration=calib,
        options_class=f"{type(ctx.options).__module__}:{type(ctx.options).__name__}",
        options=ctx.options.to_dict(), context=ctx.sent())


def isolated_export(f: Format, prec: str, ctx: ExportContext, src: ExportRecord, out: Path,
                    model: ModelSource, timeout_s: float):
    """Build the artifact in a child process (artifacts/child.py); its ExportResult. A crash, a hang past
    ``timeout_s`` or an error raises ExportError (or BackendUnavailable) with the reason."""
    import json
    import shutil
    import tempfile

    work = Path(tempfile.mkdtemp(prefix="infer-compare-export-"))
    try:
        spec_path, result_path, err_path = work / "spec.json", work / "result.json", work / "output.txt"
        spec_path.write_text(json.dumps(_export_spec(f, prec, ctx, src, out, model, work).to_dict()))
        try:
            rc, timed_out = launch.run("infer_compare.artifacts.child", [str(spec_path), str(result_path)],
                                       timeout_s, err_path)
        except launch.ChildNotStarted as e:
            raise ExportError(f"{f.title} {prec} export: {e}") from None
        output = launch.read_tail(err_path)
        if timed_out:
            raise ExportError(f"{f.title} {prec} export timed out after {timeout_s:.0f} s (a hang, or raise "
                              f"--export-timeout); killed" + (f": {output.splitlines()[-1]}"
                                                              if output else ""))
        if not result_path.exists():
            raise ExportError(f"{f.title} {prec} exporter process crashed ({launch.describe_exit(rc)})"
                              + (f": {output.splitlines()[-1]}" if output else ""))
        res = json.loads(result_path.read_text())
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if res["ok"]:
        return ExportResult(res["path"], res.get("options") or {}, list(res.get("notes") or ()))
    if res["kind"] == "unavailable":
        raise BackendUnavailable(res["error"], res.get("hint", ""))
    if res["kind"] == "refused":
        raise ExportRefused(res["error"])
    raise ExportError(res["error"] if res["kind"] == "export"
                      else f"{f.title} {prec} export failed: {res['error']}")


def inside(path: str | os.PathLike, folder: str | os.PathLike) -> str:
    """``path`` relative to ``folder`` (an export's file in the cache entry it is built in), both taken with
    their symbolic links resolved: with the cache reached through a link, an exporter that gave its file's
    real path made the entry point through ``..`` into its own temporary build folder, gone once the entry was
    installed. A file outside the folder is an exporter's error, said as such."""
    rel = os.path.relpath(os.path.realpath(path), os.path.realpath(folder))
    if rel == os.pardir or rel.startswith(os.pardir + os.sep) or os.path.isabs(rel):
        raise InferCompareError(f"the exporter wrote its file outside its build folder: {path} "
                                f"(folder {folder})")
    return rel
