"""``run_bundle()``: measure a bundle on the device, without torch or converters: verify
it, seed the artifact chain with what it carries, build what it defers where the
exporter is present, measure, check parity against its reference."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable
from typing import Any

from infer_compare.artifacts.chain import Key, Unbuilt
from infer_compare.base import memory, npyfile
from infer_compare.base.batches import count, load
from infer_compare.base.errors import UsageError
from infer_compare.base.progress import Progress, Warnings
from infer_compare.base.records import EXPORT_FAILED, SKIPPED, ExportRecord, ModelInfo, Report
from infer_compare.bundle.common import BundleError, sha256_file
from infer_compare.bundle.verify import Verified, verify
from infer_compare.catalog import device_kinds
from infer_compare.catalog.formats import FORMATS, PRECISIONS
from infer_compare.catalog.runtimes import libraries
from infer_compare.data.bundled import DataSets
from infer_compare.host import env
from infer_compare.measure.options import MeasureOptions
from infer_compare.measure.plan import Selection, check_devices_present
from infer_compare.measure.run import measure as measure_all
from infer_compare.models import received_spec
from infer_compare.prepare.model import judge_outputs_as, kind_options
from infer_compare.prepare.prepared import Prepared


def _load_array(v: Verified, name: str):
    """A data entry's arrays, read once (memory-mapped where the file holds them uncompressed)."""
    d = v.manifest["data"].get(name)
    if d is None:
        return None
    try:
        if d.get("compressed") == "npz" and "arrays" not in d:  # one array, compressed, named as its entry
            got = load(v.path(d["path"]), mmap=True)
            if not isinstance(got, dict) or list(got) != [name]:
                raise ValueError(f"it holds {list(got) if isinstance(got, dict) else 'one unnamed array'}, "
                                 f"not '{name}'")
            return got[name]
        if str(d["path"]).endswith(".npz"):  # several inputs or outputs: {name: array} in the model's order
            got = load(v.path(d["path"]), mmap=True)
            if not isinstance(got, dict) or list(got) != list(d.get("arrays") or got):
                raise ValueError(f"its arrays {list(got)} are not the manifest's "
                                 f"{list(d.get('arrays') or ())}")
            return got
        return npyfile.load(v.path(d["path"]), mmap=True)
    except (ValueError, OSError) as e:
        raise BundleError(f"bundle: data/{name} cannot be read as a numpy array: {e}") from None


def check_data_fits(v: Verified) -> int:
    """Bytes the bundle's arrays take once read, all of them together: BundleError (one line) before any is
    read when they pass the share of the memory available that arrays may take (base/npyfile.py)."""
    total = 0
    for name, d in v.manifest["data"].items():
        if name == "description" or not isinstance(d, dict):
            continue
        try:
            total += npyfile.need(v.path(d["path"]))
        except (ValueError, OSError) as e:
            raise BundleError(f"bundle: data/{name} cannot be read as a numpy array: {e}") from None
    if total > npyfile.cap():
        avail = memory.available()
        raise BundleError(f"bundle: its data needs {total / 2**30:.2f} GiB once read; at most "
                          f"{npyfile.CAP_SHARE:.0%} of the memory may go to arrays and "
                          f"{memory.describe(avail)}: the run cannot fit here; refused before it starts")
    return total


def load_inputs(v: Verified):
    """(DataSets, reference) from a verified bundle, with their shapes checked: every array read once, after
    they are known to fit together in the memory available."""
    import numpy as np

    check_data_fits(v)
    shape = tuple(int(x) for x in v.manifest["input"].get("shape", ()))
    ev, ref = _load_array(v, "eval"), _load_array(v, "reference")
    calib, labels = _load_array(v, "calibration"), _load_array(v, "labels")
    if isinstance(ev, dict) or isinstance(ref, dict):
        return _several(v, ev, ref, calib, labels)
    if ev.ndim != 4 or tuple(ev.shape[1:]) != shape or ev.dtype != np.float32 or len(ev) == 0:
        raise BundleError(f"bundle: eval inputs have shape {ev.shape} {ev.dtype}, "
                          f"expected N x {shape} float32")
    if ref.ndim != 2 or len(ref) != len(ev) or not np.issubdtype(ref.dtype, np.floating):
        raise BundleError(f"bundle: reference outputs have shape {ref.shape}, expected {len(ev)} x classes")
    if calib is not None and (calib.ndim != 4 or tuple(calib.shape[1:]) != shape):
        raise BundleError(f"bundle: calibration inputs have shape {calib.shape}, expected N x {shape}")
    if labels is not None and (labels.ndim != 1 or len(labels) != len(ev)
                               or not np.issubdtype(labels.dtype, np.integer)):
        raise BundleError(f"bundle: labels have shape {labels.shape} {labels.dtype}, "
                          f"expected {len(ev)} integers")
    ds = DataSets(calibration=calib if calib is not None else ev[:0], eval=ev, eval_labels=labels,
                  description=str(v.manifest["data"].get("description", "")))
    return ds, ref.astype(np.float32, copy=False)


def _several(v: Verified, ev, ref, calib, labels):
    """(DataSets, reference) of a model with several inputs or outputs: each a {name: rows} of one count."""
    import numpy as np

    n = count(ev)
    for what, x in (("eval inputs", ev), ("reference outputs", ref)):
        rows = {len(a) for a in (x.values() if isinstance(x, dict) else [x])}
        if rows != {n} or n == 0:
            raise BundleError(f"bundle: {what} have {sorted(rows)} rows, expected {n} for every array")
    ref = ({k: a.astype(np.float32, copy=False) for k, a in ref.items()} if isinstance(ref, dict)
           else ref.astype(np.float32, copy=False))
    empty = {k: a[:0] for k, a in ev.items()} if isinstance(ev, dict) else ev[:0]
    ds = DataSets(calibration=calib if calib is not None else empty, eval=ev, eval_labels=labels,
                  description=str(v.manifest["data"].get("description", "")))
    return ds, ref


def _export_summary(man: dict[str, Any]) -> str:
    e = man.get("export_environment") or {}
    libs = e.get("libraries") or {}
    gpus = ", ".join(str(g.get("name")) for g in e.get("gpus") or []) or "no GPU"
    names = [lib.dists[0] for lib in libraries().values() if lib.record_version]
    lib = ", ".join(f"{k} {libs[k]}" for k in names if k in libs)
    return (f"exported {man.get('created')} with infer-compare {man.get('tool_version')} "
            f"on {e.get('cpu_model', '?')} ({gpus}), {e.get('python', '?')}" + (f"; {lib}" if lib else ""))


def _model_record(man: dict[str, Any]) -> ModelInfo:
    try:
        minfo = ModelInfo.from_dict(man["model"])
    except Exception as e:
        raise BundleError(f"bundle manifest: model record is unreadable: {e}") from None
    if tuple(minfo.input_shape) != tuple(man["input"].get("shape", ())):
        raise BundleError("bundle manifest: the model's input shape and the input spec differ")
    return minfo


def _carried(v: Verified) -> dict[Key, ExportRecord]:
    man, out = v.manifest, {}
    for a in man.get("artifacts", []):
        fmt, prec = a["format"], a["precision"]
        size = sum(m["size"] for rel, m in man["files"].items() if rel.startswith(a.get("dir", "\x00") + "/"))
        exp = a.get("export") or {}
        out[(fmt, prec)] = ExportRecord(
            fmt, prec, str(v.path(a["path"]).resolve()), int(size or man["files"][a["path"]]["size"]),
            float(exp.get("build_s") or 0.0), True, key=man["files"][a["path"]]["sha256"][:20],
            source="/".join(a["source"]) if a.get("source") else "", options=dict(exp.get("options") or {}),
            notes=tuple(exp.get("notes") or ()) + ("carried in the bundle (built on the workstation)",))
    out.update(_placed(v))
    return out


def _placed(v: Verified) -> dict[Key, ExportRecord]:
    """Deferred artifacts built off the bundle and placed at their drop-in path (the Edge TPU model)."""
    out = {}
    for d in v.manifest.get("deferred", []):
        key = (d["format"], d["precision"])
        rel = v.placed.get(key)
        if rel is None:
            continue
        p = v.path(rel)
        out[key] = ExportRecord(
            key[0], key[1], str(p.resolve()), p.stat().st_size, 0.0, True, key=sha256_file(p)[:20],
            source="/".join(d["source"]), options={"placed": rel},
            notes=(f"placed in the bundle after its export ({rel}, built off the bundle: not covered by the "
                   "manifest's sha256)",))
    return out


def _unbuilt(man: dict[str, Any], carried: dict[Key, ExportRecord], model_name: str) -> dict[Key, Unbuilt]:
    """Every artifact neither carried nor deferred: why it is not available here."""
    deferred = {(d["format"], d["precision"]) for d in man.get("deferred", [])}
    failed = {(d.get("format"), d.get("precision")): d
              for d in man.get("not_built", []) if isinstance(d, dict)}
    names = ", ".join(f"{f} {p}" for f, p in carried) or "nothing"
    out: dict[Key, Unbuilt] = {}
    for f in FORMATS.values():
        for p in {f.artifact_for(q) for q in f.precisions}:
            key = (f.name, p)
            if key in carried or key in deferred:
                continue
            if key in failed:
                d = failed[key]
                st = d.get("status") if d.get("status") in (SKIPPED, EXPORT_FAILED) else SKIPPED
                out[key] = Unbuilt(st, f"not built on the workstation: {d.get('reason', '')}",
                                   d.get("hint", ""))
            else:
                out[key] = Unbuilt(SKIPPED, f"{f.title} {p} is not in this bundle (it carries: {names})",
                                   f"infer-compare export --model {model_name} --formats {f.name} -o DIR")
    return out


def prepared_from_bundle(v: Verified) -> Prepared:
    """Everything measuring needs, from a verified bundle (no torch)."""
    man = v.manifest
    minfo = _model_record(man)
    ds, ref = load_inputs(v)
    if not isinstance(ref, dict) and minfo.num_classes and ref.shape[1] != minfo.num_classes:
        raise BundleError(f"bundle: reference outputs have {ref.shape[1]} classes, "
                          f"the model {minfo.num_classes}")
    carried = _carried(v)
    notes = [f"bundle {v.root.name}: {_export_summary(man)}; {v.n_files} files verified (sha256) "
             "before loading"]
    notes += [f"{d['format']} {d['precision']}: {d.get('note', '')}" for d in man.get("deferred", [])
              if (d["format"], d["precision"]) not in v.placed]
    notes += [str(n) for n in man.get("notes", [])]
    # the spec the device side rebuilds the PyTorch model from: its data-only fields, marked received, so that
    # models.rebuild takes the data-only path (a built-in architecture or an ExportedProgram), never the
    # user's (a manifest's model_spec is never passed on as it is)
    return Prepared(minfo=minfo, model_spec=received_spec(man["model_spec"]),
                    preprocessing=dict(man["input"].get("preprocessing") or {}), ds=ds, ref=ref, model=None,
                    weights_path=None, notes=notes, carried=carried,
                    unbuilt=_unbuilt(man, carried, minfo.name), stream=_stream(v, ref))


def _stream(v: Verified, ref: Any) -> Callable[[int], Any] | None:
    """A stream model's reference per batch size, as the bundle carries them (data/reference_b{B}); None for
    a model whose rows are independent."""
    import numpy as np

    batches = (v.manifest.get("stream") or {}).get("batches")
    if not batches:
        return None
    refs = {}
    for b in batches:
        got = _load_array(v, f"reference_b{int(b)}")
        if got is None or type(got) is not type(ref) or (
                {k: np.shape(a) for k, a in got.items()} != {k: np.shape(a) for k, a in ref.items()}
                if isinstance(ref, dict) else np.shape(got) != np.shape(ref)):
            raise BundleError(f"bundle: the stream reference for batch {b} is missing or not shaped "
                              "as the reference")
        refs[int(b)] = got
    return refs.__getitem__


def check_stream_batches(prep: Prepared, sel: Selection, manifest: dict[str, Any]) -> None:
    """A stream model's rows can be judged only at the batch sizes the bundle carries a reference for: any
    other asked for is a UsageError, before anything is measured; without -b, the default batch sizes it
    carries."""
    carried = (manifest.get("stream") or {}).get("batches")
    if prep.stream is None or not carried:
        return
    if sel.batch_sizes is None:
        defaults = sorted({b for bs in sel.batch_sizes_by_kind().values() for b in bs})
        sel.batch_sizes = tuple(b for b in defaults if b in carried) or (1,)
        prep.notes.append("a stream model: measured at the default batch sizes the bundle carries a "
                          f"reference for ({', '.join(map(str, sel.batch_sizes))})")
        return
    other = [b for b in sel.batch_sizes if b not in carried]
    if other:
        raise UsageError(f"-b {','.join(map(str, other))}: this bundle's model is a stream (its outputs "
                         f"depend on how rows are grouped) and carries references for batch sizes "
                         f"{', '.join(map(str, carried))} only; export again with --max-batch to carry "
                         f"larger ones")


def _say_drop_ins(v: Verified, prog: Progress, warn: Callable[[str], None]) -> None:
    """A model compiled off the device (the Edge TPU's): found and used, or the step still to do (a warning,
    so the terminal and the report both say it)."""
    for d in v.manifest.get("deferred", []):
        if not d.get("drop_in"):
            continue
        key = (d["format"], d["precision"])
        if key in v.placed:
            prog.log(f"{d['format']} {d['precision']}: found the compiled model {v.placed[key]} "
                     "(placed after the export); its rows use it")
        else:
            warn(f"{d['format']} {d['precision']} still to compile: {d.get('note', '')}")


def _default_selection(sel: Selection, man: dict[str, Any]) -> None:
    """Without --formats/--precisions: what the bundle was exported for."""
    sel_man = man.get("selection") or {}
    if sel.formats is None and sel_man.get("formats"):
        sel.formats = tuple(f for f in sel_man["formats"] if f in FORMATS)
    if sel.precisions is None and sel_man.get("precisions"):
        sel.precisions = tuple(p for p in sel_man["precisions"] if p in PRECISIONS)


def run_bundle(bundle_dir: str | os.PathLike | Verified, *, options: MeasureOptions | None = None,
               output_kinds: Any = None, command: Iterable[str] | None = None,
               progress: Progress | None = None,
               on_row: Callable[[Report], None] | None = None, cell_runner: Callable[..., list] | None = None,
               **measure: Any) -> Report:
    """Verify the bundle, build its deferred formats where possible, measure every
    backend present and check parity against the bundle's reference. No torch needed. What to measure
    and how: ``options`` and/or its fields as keywords, as ``compare()`` (``artifacts`` aside: a bundle
    carries its own). ``output_kinds``: as ``compare(output_kinds=...)``; by default what the bundle
    recorded at export. ``cell_runner``: measures each configuration instead of one isolated child (the A/B
    gate, regress/ab.py). ``bundle_dir`` may be what ``verify()`` returned for it, every file hashed (a fleet
    node verifies the bundle as it arrives, fleet/pack.py): then it is not hashed again."""
    opts = MeasureOptions.of(options, measure, "run_bundle")
    if opts.differing(["artifacts"]):
        raise UsageError("a bundle carries its own artifacts: --artifact applies to a comparison")
    t_start = time.perf_counter()
    prog = progress or Progress()
    sel = opts.selection()
    present = device_kinds.present()
    check_devices_present(sel.devices, present)  # none of the named devices here: one line, before any work
    prog.task("verifying the bundle")
    if isinstance(bundle_dir, Verified) and not bundle_dir.hashed:
        bundle_dir = bundle_dir.root  # sizes only: hash it here
    v = bundle_dir if isinstance(bundle_dir, Verified) else verify(bundle_dir)
    prog.log(f"bundle verified: {v.n_files} files, {v.n_bytes / 2**20:.1f} MiB, sha256 ok")
    prep = prepared_from_bundle(v)
    judge_outputs_as(prep, kind_options(output_kinds) or kind_options(v.manifest.get("output_kinds") or {}))
    _default_selection(sel, v.manifest)
    check_stream_batches(prep, sel, v.manifest)
    warnings = Warnings(prog)
    _say_drop_ins(v, prog, warnings)
    prog.task("probing the environment")
    return measure_all(prep, sel, environment=env.collect(), present=present,
                       cache=opts.cache(warn=warnings, log=prog.log), prog=prog, warnings=warnings,
                       command=command, on_row=on_row, t_start=t_start, cell_runner=cell_runner)
