"""Export here, run there: bundles for devices without torch or converters.

``export_bundle()`` (workstation, needs torch) writes a directory::

    manifest.json                 model, weights hash, input spec and preprocessing,
                                  every file's sha256 and size, tool and library versions
    data/eval.npy                 the reference inputs (preprocessed, N,C,H,W float32)
    data/reference.npy            the PyTorch FP32 outputs on them
    data/labels.npy               labels, where the model has them (LeNet digits)
    data/calibration.npy          calibration inputs, for int8 builds done on the device
    artifacts/<format>-<prec>/    each artifact with its sidecar files

Formats that cannot be built on the workstation but can on the device travel as their
source with a note in the manifest ("deferred"): TensorRT engines always (an engine
is tied to its GPU and TensorRT version), and any format whose exporter is missing
here (e.g. the Edge TPU compile without ``edgetpu_compiler``) when its source was built.

``run_bundle()`` (device, no torch, no converter) verifies the manifest and every
hash before loading anything, builds the deferred formats whose exporter is present
there (the same exporter classes, with ``ExportContext.model = None``), measures every
backend present, checks parity against the stored reference outputs, and returns the
usual Report.

A bundle is untrusted input: a path that escapes the bundle (absolute, "..", a
symbolic link), a missing or extra file, a hash mismatch, an unknown format or
precision, or arrays of the wrong shape are refused with a BundleError (a UsageError:
exit status 2, one line). Arrays are read with ``allow_pickle=False``.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import __version__
from .errors import UsageError
from .formats import FORMATS, PRECISIONS, get_format

BUNDLE_KIND = "infer-compare-bundle"
BUNDLE_VERSION = 1
MANIFEST = "manifest.json"
MAX_MANIFEST_BYTES = 16 * 2**20

DEFAULT_MAX_BATCH = 256  # the largest default batch on any device kind (CUDA: 1, 32, 256)


class BundleError(UsageError):
    """A bundle that cannot be trusted or read: exit status 2, one line."""


def sha256_file(path: str | os.PathLike, chunk: int = 1 << 20) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while True:
            b = f.read(chunk)
            if not b:
                break
            h.update(b)
    return h.hexdigest()


# ------------------------------------------------------------------------------ export


def export_bundle(
    model: str,
    out_dir: str | os.PathLike,
    *,
    weights: str = "auto",
    formats: Iterable[str] | None = None,
    precisions: Iterable[str] | None = None,
    parity_samples: int | None = None,
    calibration_samples: int | None = None,
    max_batch: int = DEFAULT_MAX_BATCH,
    seed: int = 0,
    cache_dir: str | os.PathLike | None = None,
    use_cache: bool = True,
    threads: int | None = None,
    command: Iterable[str] | None = None,
    progress=None,
) -> dict[str, Any]:
    """Build every artifact of the selection (through the artifact cache) and write the
    bundle to ``out_dir`` (absent or empty). Returns the manifest."""
    from . import api
    from . import env as envmod
    from .backends.exporter import ExportContext
    from .cache import MANIFEST as CACHE_MANIFEST
    from .cache import Cache
    from .records import SKIPPED

    prog = progress or api.Progress()
    formats_t = api._check_choice("format", formats, FORMATS)
    precisions_t = api._check_choice("precision", precisions, PRECISIONS)
    if parity_samples is not None and parity_samples < 1:
        raise UsageError(f"--parity-samples must be >= 1, got {parity_samples}")
    if not 1 <= int(max_batch) <= api.MAX_BATCH:
        raise UsageError(f"--max-batch must be in 1..{api.MAX_BATCH}, got {max_batch}")
    out = Path(out_dir)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise UsageError(f"bundle directory {out} exists and is not empty")
    wanted: list[tuple[str, str]] = []  # (format, artifact precision), table order
    for f in FORMATS.values():
        if formats_t is not None and f.name not in formats_t:
            continue
        for p in f.precisions:
            if precisions_t is not None and p not in precisions_t:
                continue
            key = (f.name, f.artifact_for(p))
            if key not in wanted:
                wanted.append(key)
    if not wanted:
        raise UsageError("the selection of --formats/--precisions leaves nothing to export")
    from . import models

    models.resolve(model)
    cache = Cache(cache_dir, enabled=use_cache)
    warnings: list[str] = []

    def warn(msg: str) -> None:
        warnings.append(msg)
        prog.warn(msg)

    prog.task("probing the environment")
    environment = envmod.collect()
    threads = threads or environment.cores_physical or environment.cores_logical or 1
    prep = api.prepare_model(model, weights=weights, parity_samples=parity_samples,
                             calibration_samples=calibration_samples, seed=seed, cache=cache, threads=threads,
                             prog=prog, warn=warn)
    minfo, ds = prep.minfo, prep.ds
    ctx = ExportContext(model=prep.model, model_name=minfo.name, input_shape=tuple(minfo.input_shape),
                        num_classes=minfo.num_classes, calibration=ds.calibration, max_batch=int(max_batch),
                        preprocessing=dict(prep.preprocessing), log=prog.log, threads=int(threads),
                        cache_root=str(cache.root))
    arts = prep.arts

    def ensure(fmt: str, prec: str):
        return api._ensure(fmt, prec, ctx, arts, cache, minfo, prep.weights_path, prep.weights_build_s, ds, prog)

    ship: list[tuple[str, str]] = []
    deferred: list[dict[str, Any]] = []
    not_built: list[dict[str, Any]] = []
    for fmt, prec in wanted:
        f = get_format(fmt)
        prog.task(f"exporting {f.title} {prec}")
        src_key = f.source_of(prec)
        if f.device_built and src_key is not None:
            src = ensure(*src_key)
            if isinstance(src, tuple):
                not_built.append({"format": fmt, "precision": prec, "status": src[0],
                                  "reason": f"its source {src_key[0]} {src_key[1]} was not built: {src[1]}",
                                  "hint": src[2]})
                continue
            deferred.append({"format": fmt, "precision": prec, "source": list(src_key), "note": f.device_built})
            if src_key not in ship:
                ship.append(src_key)
            continue
        res = ensure(fmt, prec)
        if not isinstance(res, tuple):
            if (fmt, prec) not in ship:
                ship.append((fmt, prec))
            continue
        status, reason, hint = res
        src_ok = src_key is not None and src_key in arts.done and _exporter_exists(fmt)
        if status == SKIPPED and src_ok and src_key is not None:
            deferred.append({"format": fmt, "precision": prec, "source": list(src_key),
                             "note": f"not built on the workstation ({reason}); built on the device when its "
                                     f"exporter is present there" + (f" ({hint})" if hint else "")})
            if src_key not in ship:
                ship.append(src_key)
        else:
            not_built.append({"format": fmt, "precision": prec, "status": status, "reason": reason, "hint": hint})
            warn(f"{fmt} {prec} is not in the bundle: {reason}")

    prog.task(f"writing the bundle {out}")
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".tmp-{out.name}-", dir=out.parent))
    try:
        import numpy as np

        (tmp / "data").mkdir()
        data: dict[str, Any] = {"description": ds.description}
        arrays = {"eval": ds.eval, "reference": prep.ref, "calibration": ds.calibration}
        if ds.eval_labels is not None:
            arrays["labels"] = ds.eval_labels
        for name, a in arrays.items():
            a = np.ascontiguousarray(a)
            rel = f"data/{name}.npy"
            np.save(tmp / rel, a, allow_pickle=False)
            data[name] = {"path": rel, "shape": list(a.shape), "dtype": str(a.dtype)}
        artifacts = []
        for fmt, prec in ship:
            rec = arts.done[(fmt, prec)]
            d = f"artifacts/{fmt}-{prec}"
            (tmp / d).mkdir(parents=True)
            main = Path(rec.path)
            if get_format(fmt).source_of(prec) is None:  # the weights file itself (cache, hub or the user's)
                files = [(main, "weights.pt")]
                main_rel = f"{d}/weights.pt"
            else:
                entry = cache.root / fmt / rec.key
                if not (entry / CACHE_MANIFEST).is_file():
                    raise UsageError(f"cache entry of {fmt} {prec} vanished while exporting: {entry}")
                files = [(p, p.relative_to(entry).as_posix()) for p in sorted(entry.rglob("*"))
                         if p.is_file() and not p.is_symlink() and p.relative_to(entry).as_posix() != CACHE_MANIFEST]
                main_rel = f"{d}/{main.relative_to(entry).as_posix()}"
            for srcf, rel in files:
                dst = tmp / d / rel
                dst.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(srcf, dst)
            src_rec = rec.source
            src_of = get_format(fmt).source_of(prec)
            source = list(src_of) if src_of is not None else None
            artifacts.append({
                "format": fmt, "precision": prec, "path": main_rel, "dir": d, "source": source,
                "export": {"options": rec.options, "notes": list(rec.notes), "build_s": rec.export_s,
                           "cache_key": rec.key, "built_from": os.path.basename(src_rec) if src_rec else ""},
                "selected": (fmt, prec) in wanted,
            })
        manifest: dict[str, Any] = {
            "kind": BUNDLE_KIND,
            "bundle_version": BUNDLE_VERSION,
            "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "tool_version": __version__,
            "command": list(command or sys.argv),
            "model": minfo.to_dict(),
            "model_spec": dict(prep.model_spec),
            "input": {"shape": list(minfo.input_shape), "dtype": "float32", "layout": "NCHW",
                      "preprocessing": dict(prep.preprocessing)},
            "selection": {"formats": list(formats_t or ()), "precisions": list(precisions_t or ()),
                          "exported": [list(k) for k in wanted], "max_batch": int(max_batch), "seed": int(seed)},
            "data": data,
            "artifacts": artifacts,
            "deferred": deferred,
            "not_built": not_built,
            "notes": list(prep.notes),
            "warnings": warnings,
            "export_environment": environment.to_dict(),
        }
        manifest["files"] = {
            p.relative_to(tmp).as_posix(): {"sha256": sha256_file(p), "size": p.stat().st_size}
            for p in sorted(tmp.rglob("*")) if p.is_file()
        }
        (tmp / MANIFEST).write_text(json.dumps(manifest, indent=1, default=str) + "\n")
        for p in tmp.rglob("*"):
            os.chmod(p, 0o755 if p.is_dir() else 0o644)
        os.chmod(tmp, 0o755)
        if out.exists():
            out.rmdir()  # empty (checked above)
        os.replace(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return manifest


def _exporter_exists(fmt: str) -> bool:
    """True when this build has an exporter for ``fmt`` (its software may still be missing here)."""
    from .backends import load_impl

    try:
        f = get_format(fmt)
        for p in f.precisions:
            load_impl(f.exporter_for(f.artifact_for(p)))
    except (ImportError, AttributeError):
        return False
    return True


# ------------------------------------------------------------------------------ verify


@dataclass
class Verified:
    root: Path
    manifest: dict[str, Any]
    n_files: int
    n_bytes: int

    def path(self, rel: str) -> Path:
        return self.root / rel


def _check_rel(root: Path, rel: Any, what: str) -> Path:
    """A manifest path: relative, no '..', no symbolic link on the way, inside the bundle."""
    if not isinstance(rel, str) or not rel or len(rel) > 1024 or "\x00" in rel:
        raise BundleError(f"bundle manifest: bad path for {what}: {rel!r}")
    if rel.startswith(("/", "\\")) or "\\" in rel or (len(rel) > 1 and rel[1] == ":"):
        raise BundleError(f"bundle manifest: {what} path {rel!r} is absolute; refused")
    parts = rel.split("/")
    if any(p in ("", ".", "..") for p in parts):
        raise BundleError(f"bundle manifest: {what} path {rel!r} leaves the bundle or is not normalised; refused")
    cur = root
    for p in parts:
        cur = cur / p
        if cur.is_symlink():
            raise BundleError(f"bundle: {rel} is (or passes through) a symbolic link; bundles hold plain files only")
    real_root = os.path.realpath(root)
    real = os.path.realpath(cur)
    if os.path.commonpath([real_root, real]) != real_root:
        raise BundleError(f"bundle: {rel} resolves outside the bundle; refused")
    if not cur.is_file():
        raise BundleError(f"bundle: {what} {rel} is missing (or not a regular file)")
    return cur


def verify(bundle_dir: str | os.PathLike) -> Verified:
    """Check the manifest and every file's size and sha256 before anything is loaded.
    Raises BundleError (exit 2) with one line saying what is wrong."""
    root = Path(bundle_dir)
    if not root.is_dir():
        raise BundleError(f"bundle directory not found: {root}")
    mpath = root / MANIFEST
    if mpath.is_symlink():
        raise BundleError(f"bundle: {MANIFEST} is a symbolic link; refused")
    if not mpath.is_file():
        raise BundleError(f"{root} is not an infer-compare bundle (no {MANIFEST})")
    if mpath.stat().st_size > MAX_MANIFEST_BYTES:
        raise BundleError(f"bundle: {MANIFEST} is larger than {MAX_MANIFEST_BYTES >> 20} MiB; refused")
    try:
        man = json.loads(mpath.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise BundleError(f"bundle: {MANIFEST} is not valid JSON: {e}") from None
    if not isinstance(man, dict) or man.get("kind") != BUNDLE_KIND:
        raise BundleError(f"bundle: {MANIFEST} is not an infer-compare bundle manifest")
    v = man.get("bundle_version")
    if not isinstance(v, int) or not 1 <= v <= BUNDLE_VERSION:
        raise BundleError(f"bundle version {v!r} is not readable by infer-compare {__version__} (reads 1.."
                          f"{BUNDLE_VERSION}; upgrade infer-compare)")
    files = man.get("files")
    if not isinstance(files, dict) or not files:
        raise BundleError("bundle manifest: no file list")
    for key in ("model", "model_spec", "input", "data"):
        if not isinstance(man.get(key), dict):
            raise BundleError(f"bundle manifest: '{key}' is missing or not an object")
    for key in ("artifacts", "deferred"):
        if not isinstance(man.get(key, []), list):
            raise BundleError(f"bundle manifest: '{key}' is not a list")
    # formats and precisions: known ones only
    for a in list(man.get("artifacts", [])) + list(man.get("deferred", [])):
        if not isinstance(a, dict):
            raise BundleError("bundle manifest: an artifact entry is not an object")
        fmt, prec = a.get("format"), a.get("precision")
        if fmt not in FORMATS:
            raise BundleError(f"bundle manifest: unknown format {fmt!r} (known: {', '.join(FORMATS)})")
        if prec not in PRECISIONS:
            raise BundleError(f"bundle manifest: unknown precision {prec!r} for {fmt} (known: {', '.join(PRECISIONS)})")
        src = a.get("source")
        if src is not None and (not isinstance(src, list) or len(src) != 2 or src[0] not in FORMATS
                                or src[1] not in PRECISIONS):
            raise BundleError(f"bundle manifest: bad source {src!r} for {fmt} {prec}")
    # every listed file: a plain file inside, of the recorded size and hash
    n_bytes = 0
    for rel, meta in files.items():
        p = _check_rel(root, rel, "file")
        if not isinstance(meta, dict) or not isinstance(meta.get("sha256"), str) or not isinstance(meta.get("size"), int):
            raise BundleError(f"bundle manifest: no sha256/size for {rel}")
        size = p.stat().st_size
        if size != meta["size"]:
            raise BundleError(f"bundle: {rel} has {size} bytes, the manifest says {meta['size']}: refused "
                              "(corrupted or tampered)")
        if sha256_file(p) != meta["sha256"].lower():
            raise BundleError(f"bundle: sha256 of {rel} does not match the manifest: refused (corrupted or tampered)")
        n_bytes += size
    # paths referenced elsewhere must be listed; nothing unlisted under artifacts/ or data/
    refs = [(a.get("path"), f"{a.get('format')} {a.get('precision')} artifact") for a in man.get("artifacts", [])]
    refs += [(d.get("path") if isinstance(d, dict) else None, f"data '{k}'")
             for k, d in man["data"].items() if k != "description"]
    for rel, what in refs:
        _check_rel(root, rel, what)
        if rel not in files:
            raise BundleError(f"bundle manifest: {what} {rel!r} has no hash in the file list; refused")
    for sub in ("artifacts", "data"):
        base = root / sub
        if base.is_symlink():
            raise BundleError(f"bundle: {sub}/ is a symbolic link; refused")
        if base.is_dir():
            for p in base.rglob("*"):
                rel = p.relative_to(root).as_posix()
                if p.is_symlink() or (p.is_file() and rel not in files):
                    raise BundleError(f"bundle: {rel} is not in the manifest's file list; refused")
    for k in ("eval", "reference"):
        if k not in man["data"]:
            raise BundleError(f"bundle manifest: data '{k}' is missing")
    return Verified(root, man, len(files), n_bytes)


# --------------------------------------------------------------------------------- run


def _load_array(v: Verified, name: str):
    import numpy as np

    d = v.manifest["data"].get(name)
    if d is None:
        return None
    try:
        return np.load(v.path(d["path"]), allow_pickle=False)
    except (ValueError, OSError) as e:
        raise BundleError(f"bundle: data/{name} cannot be read as a numpy array: {e}") from None


def load_inputs(v: Verified):
    """(DataSets, reference) from a verified bundle, with their shapes checked."""
    import numpy as np

    from .data import DataSets

    shape = tuple(int(x) for x in v.manifest["input"].get("shape", ()))
    ev, ref = _load_array(v, "eval"), _load_array(v, "reference")
    calib, labels = _load_array(v, "calibration"), _load_array(v, "labels")
    if ev.ndim != 4 or tuple(ev.shape[1:]) != shape or ev.dtype != np.float32 or len(ev) == 0:
        raise BundleError(f"bundle: eval inputs have shape {ev.shape} {ev.dtype}, expected N x {shape} float32")
    if ref.ndim != 2 or len(ref) != len(ev) or not np.issubdtype(ref.dtype, np.floating):
        raise BundleError(f"bundle: reference outputs have shape {ref.shape}, expected {len(ev)} x classes")
    if calib is not None and (calib.ndim != 4 or tuple(calib.shape[1:]) != shape):
        raise BundleError(f"bundle: calibration inputs have shape {calib.shape}, expected N x {shape}")
    if labels is not None and (labels.ndim != 1 or len(labels) != len(ev) or not np.issubdtype(labels.dtype, np.integer)):
        raise BundleError(f"bundle: labels have shape {labels.shape} {labels.dtype}, expected {len(ev)} integers")
    ds = DataSets(calibration=calib if calib is not None else ev[:0], eval=ev, eval_labels=labels,
                  description=str(v.manifest["data"].get("description", "")))
    return ds, ref.astype(np.float32)


def _export_summary(man: dict[str, Any]) -> str:
    e = man.get("export_environment") or {}
    libs = e.get("libraries") or {}
    gpus = ", ".join(str(g.get("name")) for g in e.get("gpus") or []) or "no GPU"
    lib = ", ".join(f"{k} {libs[k]}" for k in ("torch", "onnx", "openvino", "tensorflow-cpu") if k in libs)
    return (f"exported {man.get('created')} with infer-compare {man.get('tool_version')} on {e.get('cpu_model', '?')} "
            f"({gpus}), {e.get('python', '?')}" + (f"; {lib}" if lib else ""))


def run_bundle(
    bundle_dir: str | os.PathLike,
    *,
    backends: Iterable[str] | None = None,
    formats: Iterable[str] | None = None,
    precisions: Iterable[str] | None = None,
    devices: Iterable[str] | None = None,
    batch_sizes: Iterable[int] | str | None = None,
    threads: int | None = None,
    warmup_iters: int = 2,
    min_iters: int = 5,
    min_time_s: float = 1.0,
    cell_timeout_s: float = 600.0,
    cache_dir: str | os.PathLike | None = None,
    use_cache: bool = True,
    command: Iterable[str] | None = None,
    progress=None,
    on_row: Callable | None = None,
    runner_options: dict[str, dict[str, Any]] | None = None,
    parity_every_batch: bool = False,
):
    """Verify the bundle, build its deferred formats where possible, measure every
    backend present and check parity against the bundle's reference. No torch needed."""
    from . import api
    from . import env as envmod
    from .cache import Cache
    from .records import EXPORT_FAILED, SKIPPED, ExportRecord, ModelInfo

    t_start = time.perf_counter()
    prog = progress or api.Progress()
    sel = api._selection(backends, formats, precisions, devices, batch_sizes, threads, warmup_iters, min_iters,
                         min_time_s, cell_timeout_s, 0, runner_options)
    sel.parity_every_batch = bool(parity_every_batch)
    prog.task("verifying the bundle")
    v = verify(bundle_dir)
    man = v.manifest
    prog.log(f"bundle verified: {v.n_files} files, {v.n_bytes / 2**20:.1f} MiB, sha256 ok")
    try:
        minfo = ModelInfo.from_dict(man["model"])
    except Exception as e:
        raise BundleError(f"bundle manifest: model record is unreadable: {e}") from None
    if tuple(minfo.input_shape) != tuple(man["input"].get("shape", ())):
        raise BundleError("bundle manifest: the model's input shape and the input spec differ")
    ds, ref = load_inputs(v)
    if ref.shape[1] != minfo.num_classes:
        raise BundleError(f"bundle: reference outputs have {ref.shape[1]} classes, the model {minfo.num_classes}")
    sel_man = man.get("selection") or {}
    if sel.formats is None and sel_man.get("formats"):
        sel.formats = tuple(f for f in sel_man["formats"] if f in FORMATS)
    if sel.precisions is None and sel_man.get("precisions"):
        sel.precisions = tuple(p for p in sel_man["precisions"] if p in PRECISIONS)

    arts = api._Artifacts()
    carried = []
    for a in man.get("artifacts", []):
        fmt, prec = a["format"], a["precision"]
        size = sum(m["size"] for rel, m in man["files"].items() if rel.startswith(a.get("dir", "\x00") + "/"))
        exp = a.get("export") or {}
        arts.done[(fmt, prec)] = ExportRecord(
            fmt, prec, str(v.path(a["path"]).resolve()), int(size or man["files"][a["path"]]["size"]),
            float(exp.get("build_s") or 0.0), True, key=man["files"][a["path"]]["sha256"][:20],
            source="/".join(a["source"]) if a.get("source") else "", options=dict(exp.get("options") or {}),
            notes=tuple(exp.get("notes") or ()) + ("carried in the bundle (built on the workstation)",))
        carried.append(f"{fmt} {prec}")
    deferred = {(d["format"], d["precision"]): d for d in man.get("deferred", [])}
    failed_at_export = {(d.get("format"), d.get("precision")): d for d in man.get("not_built", [])
                        if isinstance(d, dict)}
    for f in FORMATS.values():
        for p in {f.artifact_for(q) for q in f.precisions}:
            key = (f.name, p)
            if key in arts.done or key in deferred:
                continue
            if key in failed_at_export:
                d = failed_at_export[key]
                st = d.get("status") if d.get("status") in (SKIPPED, EXPORT_FAILED) else SKIPPED
                arts.failed[key] = (st, f"not built on the workstation: {d.get('reason', '')}", d.get("hint", ""))
            else:
                arts.failed[key] = (SKIPPED, f"{f.title} {p} is not in this bundle (it carries: "
                                    f"{', '.join(carried) or 'nothing'})",
                                    f"infer-compare export --model {minfo.name} --formats {f.name} --out DIR")
    notes = [f"bundle {v.root.name}: {_export_summary(man)}; {v.n_files} files verified (sha256) before loading"]
    notes += [f"{d['format']} {d['precision']}: {d.get('note', '')}" for d in deferred.values()]
    notes += [str(n) for n in man.get("notes", [])]
    prep = api.Prepared(minfo=minfo, model_spec=dict(man["model_spec"]),
                        preprocessing=dict(man["input"].get("preprocessing") or {}), ds=ds, ref=ref, arts=arts,
                        model=None, weights_path=None, notes=notes)
    cache = Cache(cache_dir, enabled=use_cache)
    prog.task("probing the environment")
    environment = envmod.collect()
    present = envmod.devices()
    return api.measure_prepared(prep, sel, environment=environment, present=present, cache=cache, prog=prog,
                                warnings=[], command=command, on_row=on_row, t_start=t_start)
