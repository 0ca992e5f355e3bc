"""``export_bundle()``: build every artifact of the selection through the artifact chain
(workstation, needs torch) and write the bundle directory atomically."""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from infer_compare.artifacts.chain import ArtifactChain, Unbuilt
from infer_compare.backends.exporter import ExportContext
from infer_compare.base.batches import is_multi
from infer_compare.base.cache import MANIFEST as CACHE_MANIFEST
from infer_compare.base.cache import Cache, entry_dir
from infer_compare.base.errors import UsageError
from infer_compare.base.layout import of_model_info
from infer_compare.base.progress import Progress, Warnings
from infer_compare.base.records import SKIPPED
from infer_compare.base.version import __version__
from infer_compare.bundle.common import BUNDLE_KIND, BUNDLE_VERSION, DEFAULT_MAX_BATCH, MANIFEST, sha256_file
from infer_compare.bundle.export_torch import bundle_spec, torch_root_as_data
from infer_compare.catalog.formats import FORMATS, PRECISIONS, get_format
from infer_compare.catalog.runtimes import load_impl
from infer_compare.host import env
from infer_compare.measure.plan import MAX_BATCH, check_choice, check_runner_options
from infer_compare.prepare.model import check_model, judge_outputs_as, kind_options, prepare_any
from infer_compare.prepare.prepared import Prepared

Key = tuple[str, str]


@dataclass
class Plan:
    """What goes into the bundle: artifacts shipped, formats built on the device, and not built."""

    wanted: list[Key]
    ship: list[Key] = field(default_factory=list)
    deferred: list[dict[str, Any]] = field(default_factory=list)
    not_built: list[dict[str, Any]] = field(default_factory=list)

    def add_ship(self, key: Key) -> None:
        if key not in self.ship:
            self.ship.append(key)


def _wanted(formats_t: tuple[str, ...] | None, precisions_t: tuple[str, ...] | None) -> list[Key]:
    wanted: list[Key] = []
    for f in FORMATS.values():
        if formats_t is not None and f.name not in formats_t:
            continue
        for p in f.precisions:
            key = (f.name, f.artifact_for(p))
            if (precisions_t is None or p in precisions_t) and key not in wanted:
                wanted.append(key)
    if not wanted:
        raise UsageError("the selection of --formats/--precisions leaves nothing to export")
    return wanted


def _exporter_exists(fmt: str) -> bool:
    """True when this build has an exporter for ``fmt`` (its software may still be missing here)."""
    f = get_format(fmt)
    try:
        for p in f.precisions:
            load_impl(f.exporter_for(f.artifact_for(p)))
    except (ImportError, AttributeError):
        return False
    return True


def _skip_kind(res: Unbuilt) -> dict[str, str]:
    """A skip's kind ("unavailable": software missing, "unsupported": not for this model), which decides
    whether the export's exit status counts it (cli/compare.py); a failed build has none."""
    return {"skip_kind": res.skip_kind} if res.status == SKIPPED else {}


def _collect(plan: Plan, chain: ArtifactChain, warn) -> None:
    """Build what can be built here; defer what must (or can only) be built on the device."""
    for fmt, prec in plan.wanted:
        f = get_format(fmt)
        src_key = f.source_of(prec)
        if f.device_built and src_key is not None:
            src = chain.get(*src_key)
            if isinstance(src, Unbuilt):
                plan.not_built.append({"format": fmt, "precision": prec, "status": src.status,
                                       "hint": src.hint, **_skip_kind(src),
                                       "reason": f"its source {src_key[0]} {src_key[1]} was not built: "
                                                 f"{src.reason}"})
                continue
            plan.deferred.append({"format": fmt, "precision": prec, "source": list(src_key),
                                  "note": f.device_built})
            plan.add_ship(src_key)
            continue
        res = chain.get(fmt, prec)
        if not isinstance(res, Unbuilt):
            plan.add_ship((fmt, prec))
        elif (res.status == SKIPPED and src_key is not None and src_key in chain.done
              and _exporter_exists(fmt)):
            plan.deferred.append({"format": fmt, "precision": prec, "source": list(src_key),
                                  "note": f"not built on the workstation ({res.reason}); built on the "
                                          "device when its exporter is present there"
                                          + (f" ({res.hint})" if res.hint else "")})
            plan.add_ship(src_key)
        else:
            plan.not_built.append({"format": fmt, "precision": prec, "status": res.status,
                                   "reason": res.reason, "hint": res.hint, **_skip_kind(res)})
            warn(f"{fmt} {prec} is not in the bundle: {res.reason}")


def needs_calibration(deferred: list[dict[str, Any]]) -> bool:
    """True when an artifact built on the device quantizes (int8 from a source that is not int8, e.g.
    int8-s8s8): only then does the bundle carry calibration inputs (an int8 TFLite or ONNX file already
    holds its scales)."""
    return any(d["precision"] == "int8" and not d["source"][1].startswith("int8") for d in deferred)


def stream_batches(max_batch: int) -> tuple[int, ...]:
    """The batch sizes a stream model's bundle carries a reference for: 1, 2, 4, ... up to ``max_batch``,
    and it."""
    out = {1, int(max_batch)}
    b = 2
    while b < max_batch:
        out.add(b)
        b *= 2
    return tuple(sorted(out))


def _write_data(tmp: Path, prep: Prepared, plan: Plan, stream: Iterable[int] = ()) -> dict[str, Any]:
    """data/*.npz: the eval inputs, the reference (and a stream model's reference per batch size in
    ``stream``: data/reference_b{B}), calibration inputs where an int8 build is left to the device, labels."""
    import numpy as np

    ds = prep.ds
    (tmp / "data").mkdir()
    data: dict[str, Any] = {"description": ds.description}
    arrays = {"eval": ds.eval, "reference": prep.ref, **{f"reference_b{b}": prep.stream(b) for b in stream}}
    if needs_calibration(plan.deferred) and ds.calibration is not None and len(ds.calibration):
        arrays["calibration"] = ds.calibration
    if ds.eval_labels is not None:
        arrays["labels"] = ds.eval_labels

    for name, a in arrays.items():  # compressed (deflate): the reference inputs were most of a Coral bundle
        rel = f"data/{name}.npz"
        if is_multi(a):  # several inputs or outputs: one array per name, in the model's order
            with open(tmp / rel, "wb") as f:
                np.savez_compressed(f, **{k: np.ascontiguousarray(v) for k, v in a.items()})
            data[name] = {"path": rel,
                          "arrays": {k: {"shape": list(np.shape(v)), "dtype": str(np.asarray(v).dtype)}
                                     for k, v in a.items()}}
            continue
        a = np.ascontiguousarray(a)
        with open(tmp / rel, "wb") as f:
            np.savez_compressed(f, **{name: a})
        data[name] = {"path": rel, "shape": list(a.shape), "dtype": str(a.dtype), "compressed": "npz"}
    return data


def _artifact_files(chain: ArtifactChain, key: Key,
                    roots: Iterable[Key] = ()) -> tuple[list[tuple[Path, str]], str]:
    """(source file, path inside the artifact's folder) pairs, and the main file's path there."""
    fmt, prec = key
    rec = chain.done[key]
    main = Path(rec.path)
    if get_format(fmt).source_of(prec) is None:  # the weights file itself (cache, hub or the user's)
        return [(main, "weights.pt")], "weights.pt"
    if key in roots:  # the user's own file (an ONNX or TFLite model), carried as given under the usual name
        name = "model" + get_format(fmt).suffix  # (the Edge TPU drop-in expects model.tflite's compiled name)
        return [(main, name)], name
    entry = entry_dir(rec.path)  # shared or private (--no-cache, an unwritable cache)
    if entry is None or not (entry / CACHE_MANIFEST).is_file():
        raise UsageError(f"cache entry of {fmt} {prec} vanished while exporting: {entry}")
    files = [(p, p.relative_to(entry).as_posix()) for p in sorted(entry.rglob("*"))
             if p.is_file() and not p.is_symlink() and p.relative_to(entry).as_posix() != CACHE_MANIFEST]
    return files, main.relative_to(entry).as_posix()


def _write_artifacts(tmp: Path, plan: Plan, chain: ArtifactChain, roots: Iterable[Key] = (),
                     replaced: dict[Key, tuple[Path, str]] | None = None) -> list[dict[str, Any]]:
    """Each shipped artifact's files under artifacts/<format>-<precision>/; ``replaced``: {key: (file, note)}
    carried instead of the chain's (a factory's module as an ExportedProgram, export_torch.py)."""
    out = []
    replaced = replaced or {}
    for fmt, prec in plan.ship:
        rec = chain.done[(fmt, prec)]
        d = f"artifacts/{fmt}-{prec}"
        (tmp / d).mkdir(parents=True)
        if (fmt, prec) in replaced:
            files, main_rel = [(replaced[(fmt, prec)][0], "weights.pt")], "weights.pt"
            rec = rec.replace(notes=tuple(rec.notes) + (replaced[(fmt, prec)][1],))
        else:
            files, main_rel = _artifact_files(chain, (fmt, prec), tuple(roots))
        for srcf, rel in files:
            dst = tmp / d / rel
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(srcf, dst)
        src_of = get_format(fmt).source_of(prec)
        out.append({
            "format": fmt, "precision": prec, "path": f"{d}/{main_rel}", "dir": d,
            "source": list(src_of) if src_of is not None else None,
            "export": {"options": rec.options, "notes": list(rec.notes), "build_s": rec.export_s,
                       "cache_key": rec.key,
                       "built_from": os.path.basename(rec.source) if rec.source else ""},
            "selected": (fmt, prec) in plan.wanted,
        })
    return out


def _offline_builds(tmp: Path, plan: Plan, artifacts: list[dict[str, Any]], warn) -> None:
    """A deferred format whose exporter can say how to build it off the device (the Edge TPU compile, on an
    x86-64 Linux host): its entry gets ``drop_in`` (the file ``run`` picks up) and that one-line instruction,
    which the export also prints."""
    paths = {(a["format"], a["precision"]): a["path"] for a in artifacts}
    for d in plan.deferred:
        f, src_rel = get_format(d["format"]), paths.get(tuple(d["source"]))
        try:
            ecls = load_impl(f.exporter_for(d["precision"]))
        except (ImportError, AttributeError):
            ecls = None
        offline = getattr(ecls, "offline_build", None)
        if offline is None or src_rel is None:
            continue
        out_rel = f"artifacts/{d['format']}-{d['precision']}"
        d["drop_in"], d["note"] = offline(src_rel, out_rel)
        (tmp / out_rel).mkdir(parents=True, exist_ok=True)
        warn(d["note"])
        try:  # what the compile would map, said now (the Edge TPU pre-check of the file that travels)
            d["precheck"] = ecls.explain_unavailable(None, str(tmp / src_rel), d["precision"])
        except Exception as e:  # a prediction, never a failed export
            d["precheck"] = f"(pre-check failed: {type(e).__name__}: {e})"


def _manifest(prep: Prepared, plan: Plan, data: dict[str, Any], artifacts: list[dict[str, Any]],
              selection: dict, environment, warnings: list[str],
              command: Iterable[str] | None) -> dict[str, Any]:
    minfo = prep.minfo
    return {
        "kind": BUNDLE_KIND, "bundle_version": BUNDLE_VERSION,
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "tool_version": __version__, "command": list(command or sys.argv), "model": minfo.to_dict(),
        "model_spec": bundle_spec(prep),  # data only: no module, factory, path or loader (manifest_schema.py)
        "input": {"shape": list(minfo.input_shape), "dtype": "float32", "layout": "NCHW",
                  "preprocessing": dict(prep.preprocessing)},
        "selection": selection, "data": data, "artifacts": artifacts, "deferred": plan.deferred,
        "not_built": plan.not_built, "notes": list(prep.notes), "warnings": warnings,
        "export_environment": environment.to_dict(),
    }


def _write_bundle(out: Path, write) -> None:
    """``write(tmp)`` fills a temporary folder beside ``out``, which then replaces ``out`` atomically."""
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".tmp-{out.name}-", dir=out.parent))
    try:
        write(tmp)
        for p in tmp.rglob("*"):
            os.chmod(p, 0o755 if p.is_dir() else 0o644)
        os.chmod(tmp, 0o755)
        if out.exists():
            out.rmdir()  # empty (checked before any work)
        os.replace(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def export_bundle(model: str, out_dir: str | os.PathLike, *, weights: str = "auto",
                  formats: Iterable[str] | None = None, precisions: Iterable[str] | None = None,
                  parity_samples: int | None = None, calibration_samples: int | None = None,
                  max_batch: int = DEFAULT_MAX_BATCH, seed: int = 0,
                  cache_dir: str | os.PathLike | None = None,
                  use_cache: bool = True, threads: int | None = None, command: Iterable[str] | None = None,
                  progress: Progress | None = None, export_timeout_s: float = 1800.0,
                  runner_options: dict[str, Any] | None = None, output_kinds: Any = None,
                  input_shape: Any = None) -> dict[str, Any]:
    """Build every artifact of the selection (through the artifact cache) and write the
    bundle to ``out_dir`` (absent or empty). Returns the manifest. ``runner_options``: the options
    that describe how artifacts are built (e.g. ``{"onnxruntime": {"int8_reduce_range": "on"}}`` for an
    int8 file meant for a CPU without VNNI), as ``compare(runner_options=...)``. ``output_kinds``: as
    ``compare(output_kinds=...)``, checked against the model's outputs and recorded in the manifest
    ("output_kinds"), so that ``run`` judges parity by them. ``input_shape``: as
    ``compare(input_shape=...)``, the sizes the model leaves open (a .onnx file's dynamic dimensions); the
    bundle records the shape it was exported at."""
    prog = progress or Progress()
    formats_t, precisions_t = (check_choice("format", formats, FORMATS),
                               check_choice("precision", precisions, PRECISIONS))
    out = _checked_out(out_dir, parity_samples, max_batch)
    option_sets = check_runner_options(runner_options)
    kinds = kind_options(output_kinds)
    plan = Plan(_wanted(formats_t, precisions_t))
    check_model(model, parity_samples)
    warn = warnings = Warnings(prog)
    cache = Cache(cache_dir, enabled=use_cache, warn=warn, log=prog.log)

    prog.task("probing the environment")
    environment = env.collect()
    threads = threads or environment.cores_physical or environment.cores_logical or 1
    prep = prepare_any(model, weights=weights, input_shape=input_shape, example_input=None, data=None,
                       parity_samples=parity_samples, calibration_samples=calibration_samples, seed=seed,
                       cache=cache, threads=threads, prog=prog, warn=warn)
    judge_outputs_as(prep, kinds)  # a kind that does not fit an output: one line, before any export
    chain = _export_chain(prep, cache, int(max_batch), threads, prog, option_sets)
    chain.export_timeout_s = float(export_timeout_s)
    prog.task("exporting")
    _collect(plan, chain, warn)
    work = Path(tempfile.mkdtemp(prefix="infer-compare-export-"))
    try:
        replaced = torch_root_as_data(prep, plan, work, warn)  # a model whose PyTorch form is code: data
        return _write_all(out, prep, plan, chain, replaced, environment, warnings, command, kinds,
                          selection_of(formats_t, precisions_t, plan, max_batch, seed), int(max_batch), prog)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def selection_of(formats_t, precisions_t, plan: Plan, max_batch: int, seed: int) -> dict[str, Any]:
    return {"formats": list(formats_t or ()), "precisions": list(precisions_t or ()),
            "exported": [list(k) for k in plan.wanted], "max_batch": int(max_batch), "seed": int(seed)}


def _write_all(out: Path, prep: Prepared, plan: Plan, chain: ArtifactChain, replaced, environment, warnings,
               command, kinds, selection: dict[str, Any], max_batch: int, prog: Progress) -> dict[str, Any]:
    """The bundle written to ``out`` (through a temporary folder beside it); its manifest."""
    warn = warnings
    prog.task(f"writing the bundle {out}")
    manifest: dict[str, Any] = {}

    def write(tmp: Path) -> None:
        data = _write_data(tmp, prep, plan, stream_batches(max_batch) if prep.stream is not None else ())
        artifacts = _write_artifacts(tmp, plan, chain, prep.carried, replaced)
        _offline_builds(tmp, plan, artifacts, warn)
        manifest.update(_manifest(prep, plan, data, artifacts, selection, environment, warnings, command))
        # the user's and the loader's (models/torchvision_det.py)
        manifest["output_kinds"] = dict(prep.output_kinds or kinds)
        if prep.stream is not None:  # rows depend on how they are grouped: a reference per batch size
            manifest["stream"] = {"batches": list(stream_batches(max_batch))}
        manifest["files"] = {p.relative_to(tmp).as_posix(): {"sha256": sha256_file(p),
                                                             "size": p.stat().st_size}
                             for p in sorted(tmp.rglob("*")) if p.is_file()}
        (tmp / MANIFEST).write_text(json.dumps(manifest, indent=1, default=str) + "\n")

    _write_bundle(out, write)
    return manifest


def _checked_out(out_dir: str | os.PathLike, parity_samples: int | None, max_batch: int) -> Path:
    """The bundle directory, once the sizes are checked and it is absent or empty (UsageError otherwise)."""
    if parity_samples is not None and parity_samples < 1:
        raise UsageError(f"--parity-samples must be >= 1, got {parity_samples}")
    if not 1 <= int(max_batch) <= MAX_BATCH:
        raise UsageError(f"--max-batch must be in 1..{MAX_BATCH}, got {max_batch}")
    out = Path(out_dir)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise UsageError(f"bundle directory {out} exists and is not empty")
    return out


def _export_chain(prep: Prepared, cache, max_batch: int, threads: int, prog: Progress,
                  option_sets: dict[str, Any] | None = None) -> ArtifactChain:
    minfo = prep.minfo
    ctx = ExportContext(model=prep.model, model_name=minfo.name, input_shape=tuple(minfo.input_shape),
                        num_classes=minfo.num_classes, calibration=prep.ds.calibration, max_batch=max_batch,
                        model_spec=dict(prep.model_spec),
                        preprocessing=dict(prep.preprocessing), log=prog.log, threads=threads,
                        cache_root=str(cache.root), option_sets=dict(option_sets or {}),
                        # calibration laid along each input's batch axis
                        layout=of_model_info(minfo).to_dict(),
                        input_names=tuple(i["name"] for i in minfo.inputs),
                        output_names=tuple(o["name"] for o in minfo.outputs))
    chain = ArtifactChain(ctx, cache, prep.source(), prog)
    for key, rec in prep.carried.items():  # the user's ONNX or TFLite file, and what it cannot give
        chain.carry(key, rec)
    for key, why in prep.unbuilt.items():
        chain.mark(key, why)
    return chain
