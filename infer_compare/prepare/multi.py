"""Preparing a model with several inputs or several outputs (prepare/user.py does the rest).

* Inputs (several): one array per input name, in the model's order, each in the dtype the model
  declares (int64 ids stay int64). From ``--data inputs.npz`` (one array per input name, optional
  ``labels``; ``--calibration`` another .npz, else a part of it held out), or, without data: the
  bundled photos for each image input (float32, C x H x W or H x W x C, 1 or 3 channels,
  preprocessed as for a one-input model) and seeded random values of the declared dtype for every
  other input (floats standard normal, integers 0 or 1, bools), said in the report.
* Reference (several outputs): every output, keyed by its name, saved as one ``.npz``.
* Parity: output by output (parity.compare_outputs); top-1 only for [N, classes] outputs.
* Every runtime runs every input and output by name: ONNX Runtime (and its TensorRT EP), OpenVINO,
  PyTorch, TensorRT engines, TFLite and the Edge TPU (whose converter renames the tensors: matched as
  the exporter recorded, backends/tflite/bindings.py).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from infer_compare.base import batches
from infer_compare.base.batches import count
from infer_compare.base.cache import Cache
from infer_compare.base.errors import UsageError
from infer_compare.base.layout import with_batch
from infer_compare.base.progress import Progress
from infer_compare.base.records import ModelInfo
from infer_compare.data.bundled import DataSets
from infer_compare.data.user import PreprocessSpec, load_data, split_eval_calibration
from infer_compare.data.user.checks import converted
from infer_compare.parity.outputs import is_classifier
from infer_compare.prepare.inputs import bundled_photos, image_spec_of
from infer_compare.prepare.user_model import reference_note
from infer_compare.prepare.user_model import reference_of as reference_outputs


def several_io(um) -> bool:
    return len(um.inputs) > 1 or len(um.outputs) > 1


def _io_text(um) -> str:
    ins = ", ".join(s.name for s in um.inputs)
    outs = ", ".join(s.name for s in um.outputs)
    return f"{len(um.inputs)} input(s) ({ins}) and {len(um.outputs)} output(s) ({outs})"


# ---------------------------------------------------------------- inputs


def _cast(um, arrays: dict[str, np.ndarray], where: str, notes: list[str]) -> dict[str, np.ndarray]:
    """The arrays in the model's input order and declared dtypes; what a conversion did goes to ``notes``."""
    out = {}
    for s in um.inputs:
        a = arrays[s.name]
        if a.dtype != np.dtype(s.dtype) and not np.can_cast(a.dtype, s.dtype, "same_kind"):
            raise UsageError(f"{where}: input '{s.name}' is {a.dtype}; the model takes {s.dtype}")
        out[s.name], said = converted(a, s.dtype, f"input {s.name!r}")
        notes += [said] if said else []
    return out


def _npz(um, path: str, opts, seed: int):
    if Path(path).suffix.lower() != ".npz" or Path(path).is_dir():
        names = ", ".join(s.name for s in um.inputs)
        raise UsageError(f"{um.name} has {len(um.inputs)} inputs ({names}): give --data inputs.npz with one "
                         f"array per input name (a folder of images or a .npy feeds a model with one input), "
                         f"not {path}")
    try:
        with np.load(path, allow_pickle=False) as z:
            present = set(z.files)
    except Exception:  # unreadable: load_data says why, with the file's name
        present = {s.name for s in um.inputs}
    # --input-value gives the ones the file lacks
    shapes = {s.name: tuple(None if isinstance(d, str) else d for d in s.sample()) for s in um.inputs
              if s.name in present or s.name not in opts.values}
    return load_data(path, preprocess=PreprocessSpec(source="not used: array inputs"), input_shape=shapes,
                     max_images=opts.max_images if path == opts.data else None, seed=seed)


def _from_data(um, opts, n_calib: int, seed: int, prog: Progress) -> DataSets:
    prog.task(f"reading {opts.data}")
    if opts.labels:
        raise UsageError("--labels maps the class folders of an image folder; a .npz carries its own "
                         "'labels' array")
    data = _npz(um, opts.data, opts, seed)
    if opts.calibration:
        ev, calib = data, _npz(um, opts.calibration, opts, seed)
    else:
        ev, calib = split_eval_calibration(data, n_calib=min(n_calib, max(1, len(data) // 2)), seed=seed)
    given = input_values(um, opts.values)
    ev_in = {**given_rows(given, count(ev.images)), **ev.images}
    ca_in = {**given_rows(given, count(calib.images)), **calib.images}
    notes: list[str] = []
    cax, evx = _cast(um, ca_in, opts.calibration or opts.data, notes), _cast(um, ev_in, opts.data, notes)
    said = "; ".join(dict.fromkeys(notes))
    return DataSets(calibration=cax, eval=evx, eval_labels=ev.labels,
                    description=ev.description + (f"; calibration: {calib.description}"
                                                  if opts.calibration else
                                                  f"; {len(calib)} of them held out for int8 calibration")
                    + (f"; converted to the model's input dtypes: {said}" if said else ""))


def random_input(shape: tuple[int, ...], dtype: str, rng: np.random.Generator) -> np.ndarray:
    """Seeded values of ``dtype``: floats standard normal, integers 0 or 1, bools."""
    dt = np.dtype(dtype)
    if dt.kind == "f":
        return rng.standard_normal(shape).astype(dt)
    if dt.kind in "iub":
        return rng.integers(0, 2, size=shape).astype(dt)
    raise UsageError(f"an input of dtype {dtype} cannot be generated: give --data inputs.npz")


def _generated(um, opts, n_eval: int, n_calib: int, seed: int) -> tuple[DataSets, Any]:
    """--input-value where given, bundled photos for each image input, seeded random values for the others."""
    ev: dict[str, np.ndarray] = {}
    ca: dict[str, np.ndarray] = {}
    said, first_spec = [], None
    given = input_values(um, opts.values)
    given_ev, given_ca = given_rows(given, n_eval), given_rows(given, n_calib)
    for i, s in enumerate(um.inputs):
        spec = image_spec_of(s, opts) if s.batch_axis == 0 else None
        if s.name in given:
            ev[s.name], ca[s.name] = given_ev[s.name], given_ca[s.name]
            said.append(f"{s.name}: --input-value {opts.values[s.name]}")
            continue
        if spec is not None:
            ds = bundled_photos(spec, n_eval, n_calib, seed, s.dtype)
            ev[s.name], ca[s.name] = ds.eval, ds.calibration
            first_spec = first_spec or spec
            said.append(f"{s.name}: {ds.description}")
            continue
        sample = tuple(int(d) for d in s.sample())
        rng = np.random.default_rng([seed, i])
        ev[s.name], ca[s.name] = (random_input((n_eval, *sample), s.dtype, rng),
                                  random_input((n_calib, *sample), s.dtype, rng))
        kind = "standard normal" if np.dtype(s.dtype).kind == "f" else "0 or 1"
        said.append(f"{s.name}: seeded random {s.dtype} values ({kind}; no real data for this input: give "
                    f"--data inputs.npz or --input-value {s.name}=VALUE)")
    n = min(len(a) for a in ev.values())
    ev = {k: v[:n] for k, v in ev.items()}
    return DataSets(calibration=ca, eval=ev,
                    description=f"{n} samples of {len(ev)} inputs: " + "; ".join(said)), first_spec


def input_values(um, values: dict[str, str]) -> dict[str, np.ndarray]:
    """--input-value NAME=VALUE, each as one sample of its input (a number fills the sample; comma-separated
    numbers fill it in order); an unknown name or a value that does not parse as the input's dtype:
    UsageError."""
    specs = {s.name: s for s in um.inputs}
    out = {}
    for name, text in (values or {}).items():
        s = specs.get(name)
        if s is None:
            raise UsageError(f"--input-value {name}={text}: {um.name} has no input '{name}' (its inputs: "
                             f"{', '.join(specs)})")
        dt = np.dtype(s.dtype)
        try:
            items = [p for p in str(text).replace(",", " ").split() if p]
            vals = [(float(p) if dt.kind == "f" else int(p, 0) if dt.kind in "iu" else
                     {"true": 1, "false": 0, "1": 1, "0": 0}[p.lower()]) for p in items]
        except (ValueError, KeyError):
            raise UsageError(f"--input-value {name}={text}: "
                             f"not {'a number' if dt.kind == 'f' else 'an integer'} of the input's dtype "
                             f"{s.dtype}") from None
        sample = tuple(int(d) for d in s.sample())
        size = int(np.prod(sample, dtype=np.int64))
        if len(vals) not in (1, size):
            raise UsageError(f"--input-value {name}={text}: {len(vals)} values; input '{name}' takes one "
                             f"sample of shape {'x'.join(map(str, sample)) or 'scalar'} (1 or {size} values)")
        a = np.asarray(vals, dtype=np.float64)
        if not np.isfinite(a).all():
            raise UsageError(f"--input-value {name}={text}: NaN or Inf; a runtime's outputs on it cannot be "
                             "compared with the reference")
        if dt.kind in "iu" and (a.min() < np.iinfo(dt).min or a.max() > np.iinfo(dt).max):
            raise UsageError(f"--input-value {name}={text}: out of the range of {s.dtype}")
        out[name] = (np.full(sample, a[0]) if len(vals) == 1 else a.reshape(sample)).astype(dt)
    return out


def given_rows(given: dict[str, np.ndarray], n: int) -> dict[str, np.ndarray]:
    """Each given sample repeated as ``n`` rows."""
    return {k: np.ascontiguousarray(np.broadcast_to(v, (n, *v.shape))) for k, v in given.items()}


def several_inputs(um, opts, parity_samples: int | None, calibration_samples: int | None, seed: int,
                   prog: Progress) -> tuple[DataSets, Any]:
    """(DataSets with {input name: array} inputs, the first image input's preprocessing or None)."""
    if opts.data:
        return _from_data(um, opts, calibration_samples or 64, seed, prog), None
    ds, spec = _generated(um, opts, parity_samples or 32, calibration_samples or 64, seed)
    made = [s.name for s in um.inputs if f"{s.name}: seeded random" in ds.description]
    if made:
        prog.warn(f"{um.name}: no --data: input(s) {', '.join(made)} get SEEDED RANDOM values of their dtype "
                  "(the report says which); give --data inputs.npz (one array per input name) or "
                  "--input-value NAME=VALUE for real inputs")
    return ds, spec


# ---------------------------------------------------------------- reference and model record


def reference(cache: Cache, um, ds: DataSets) -> dict[str, np.ndarray]:
    """Every output's FP32 reference, {output name: N x ...} in the model's order, through the cache."""
    feed = ds.eval if batches.is_multi(ds.eval) else {um.inputs[0].name: ds.eval}

    def build(tmp):
        out = reference_outputs(um, feed)
        batches.save(tmp / "reference.npz", {k: np.asarray(v, dtype=np.float32) for k, v in out.items()})
        return {"n": batches.count(ds.eval), "outputs": list(out),
                "output_batch_axes": {s.name: s.batch_axis for s in um.outputs}}

    key = {"user_model": um.sha256 or um.weights_hash, "kind": um.kind, "data": ds.digest(),
           "outputs": [s.name for s in um.outputs], "inputs_by_role": 1}
    entry = cache.get_or_build("reference", key, build)
    # as the reference run confirmed them (base/layout.py)
    axes = entry.manifest.get("output_batch_axes") or {}
    um.outputs = tuple(replace(s, batch_axis=axes.get(s.name, s.batch_axis)) for s in um.outputs)
    got = batches.load(entry.file("reference.npz"))
    return got if isinstance(got, dict) else {um.outputs[0].name: got}


def tensor_info(s, shape: tuple | None = None) -> dict[str, Any]:
    dims = shape if shape is not None else s.shape
    return {"name": s.name, "shape": None if dims is None else list(dims), "dtype": s.dtype,
            "batch_axis": getattr(s, "batch_axis", 0)}


def input_sources(um, opts, description: str) -> dict[str, str]:
    """Where each input's values come from, in a few words (the report's per-input "source")."""
    out = {}
    for s in um.inputs:
        if s.name in (opts.values or {}):
            out[s.name] = f"--input-value {opts.values[s.name]}"
        elif opts.data:
            out[s.name] = f"--data {opts.data}"
        elif f"{s.name}: seeded random" in description:
            out[s.name] = "seeded random values (no real data)"
        else:
            out[s.name] = "bundled photos"
    return out


def _model_shape(s, rows: np.ndarray) -> tuple:
    """An output's shape as the model gives it, from the reference rows (batch at its batch axis)."""
    sample = tuple(rows.shape[1:])
    return sample if s.batch_axis is None else with_batch(sample, s.batch_axis, "batch")


def model_info(um, ref: dict[str, np.ndarray], spec, sources: dict[str, str] | None = None,
               kinds: dict[str, str] | None = None) -> ModelInfo:
    """The ModelInfo of a model with several inputs or outputs: each one listed, each output's judging said
    (``kinds``: the loader's, e.g. models/torchvision_det.py's; never class scores)."""
    notes = list(um.notes) + [reference_note(um)]
    specs = {s.name: s for s in um.outputs}
    outputs = []
    for k, a in ref.items():
        cls = is_classifier(a) and k not in (kinds or {})
        s = specs.get(k)
        d = (tensor_info(s, _model_shape(s, a)) if s is not None
             else {"name": k, "shape": ["batch", *a.shape[1:]], "dtype": str(a.dtype), "batch_axis": 0})
        outputs.append({**d, "judged_on": "top-1 and error metrics" if cls else "error metrics"})
        notes.append(f"output '{k}' {list(a.shape[1:])}: " + (
            "[N, classes]: top-1/top-5 agreement and the error metrics" if cls else
            "not [N, classes]: judged by what it means (the note on its kind below)"))
    if len(ref) > 1:
        notes.append(f"{len(ref)} outputs: each compared with its own reference; a row's verdict is its "
                     "worst output's (named in the table's cosine column, every output's figures "
                     "in the JSON)")
    notes.append(f"{_io_text(um)}: inputs fed and outputs compared by name")
    cls_out = [a for k, a in ref.items() if is_classifier(a) and k not in (kinds or {})]
    return ModelInfo(um.name, f"user-{um.kind}", "file", getattr(um, "wraps", "") or um.source,
                     (um.sha256 or um.weights_hash)[:16],
                     tuple(int(d) for d in um.inputs[0].sample()), int(cls_out[0].shape[1]) if cls_out else 0,
                     spec.to_dict() if spec is not None else {}, False, True, tuple(notes),
                     inputs=tuple({**tensor_info(s), "source": (sources or {}).get(s.name, "")}
                                  for s in um.inputs),
                     outputs=tuple(outputs))
