"""Preparing the user's own model: an ONNX file, a TorchScript file, an ExportedProgram,
a ``package.module:callable`` factory or a ``torch.nn.Module`` object (models/user.py),
on the user's data (``--data``: an ImageFolder, a flat folder of images, .npy/.npz
arrays; userdata/) or, for an image input, the bundled photos.

The result is the same :class:`~infer_compare.prepare.Prepared` that built-in models
give, so measuring does not change:

* an ONNX model is the root of its artifact chain: the user's file is carried as the
  ``onnx fp32`` artifact, OpenVINO, TensorRT and the fp16/int8 ONNX files are built from
  it, and the PyTorch-rooted formats (PyTorch rows, TFLite, Edge TPU) are skipped rows
  that say so; the reference is ONNX Runtime CPU FP32 on the original file;
* a torch model's root artifact is a file a child process can load again
  (``models.rebuild``): the TorchScript or .pt2 file, the factory's state dict, or a
  Python module exported to a .pt2 file; the reference is PyTorch FP32.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .artifacts import Unbuilt
from .cache import Cache
from .data import DataSets
from .errors import UsageError
from .prepare import Prepared
from .progress import Progress
from .records import SKIPPED, ExportRecord, ModelInfo

NEEDS_TORCH = ("the model arrived as ONNX: PyTorch rows, TFLite and the Edge TPU need the PyTorch model "
               "(litert-torch converts from PyTorch)")
NEEDS_TORCH_HINT = "give the PyTorch model: --model package.module:factory, a TorchScript file or a .pt2 file"


@dataclass(frozen=True)
class DataOptions:
    """Where the inputs come from and how images become inputs (the CLI's data flags)."""

    data: str | None = None  # --data: an image folder (ImageFolder or flat), a .npy or .npz file
    labels: str | None = None  # --labels: folder name -> class index
    calibration: str | None = None  # --calibration: int8 calibration data (default: a split of --data)
    max_images: int | None = None
    overrides: dict[str, Any] = field(default_factory=dict)  # resize, crop, mean, std, layout, bgr, scale, letterbox
    values: dict[str, str] = field(default_factory=dict)  # --input-value NAME=VALUE: inputs fed as given


def image_spec_of(inp, opts: DataOptions):
    """The preprocessing of ``inp`` if it is an image input (one float32 or uint8 input of shape C x H x W
    or H x W x C with 1 or 3 channels, any H and W: ImageNet defaults for its shape, raw 0..255 pixels for
    uint8, the user's overrides), else None."""
    from dataclasses import replace

    from .userdata import imagenet_defaults, preprocess_spec

    sample = tuple(inp.shape[1:])
    if len(sample) != 3 or inp.dtype not in ("float32", "uint8") or not ({sample[0], sample[-1]} & {1, 3}):
        return None
    spec = imagenet_defaults(sample)
    if inp.dtype == "uint8":
        spec = replace(spec, scale=1.0, mean=(0.0,) * spec.channels, std=(1.0,) * spec.channels,
                       source="raw 0..255 pixels (the input is uint8)")
    return preprocess_spec(spec, **opts.overrides)


def _image_spec(um, opts: DataOptions):
    """The preprocessing of a model with one input that is an image, or None."""
    return image_spec_of(um.inputs[0], opts) if len(um.inputs) == 1 else None


def as_input_dtype(a: np.ndarray, dtype: str) -> np.ndarray:
    """Preprocessed pixels in the input's dtype (uint8: rounded and clipped to 0..255)."""
    if np.dtype(dtype) == np.uint8:
        return np.clip(np.rint(a), 0, 255).astype(np.uint8)
    return np.ascontiguousarray(a, dtype=dtype)


def bundled_photos(spec, n_eval: int, n_calib: int, seed: int, dtype: str = "float32") -> DataSets:
    """The bundled photos, preprocessed as ``spec`` says (size or letterbox, channels, channel order,
    layout, pixel scale), in the input's ``dtype``."""
    from .data import photo_sets
    from .userdata import apply

    ds = photo_sets(lambda region: apply(region, spec), n_eval=n_eval, n_calib=n_calib, seed=seed,
                    how=f"preprocessing: {spec.describe()}")
    ds.eval, ds.calibration = as_input_dtype(ds.eval, dtype), as_input_dtype(ds.calibration, dtype)
    return ds


def _one_input(images: Any, where: str) -> np.ndarray:
    """The array of a model's one input (a .npz holding exactly one array gives it too)."""
    if not isinstance(images, dict):
        return images
    if len(images) != 1:
        raise UsageError(f"{where} holds {len(images)} inputs ({', '.join(images)}); the model has one")
    return next(iter(images.values()))


def data_sets(shape: tuple[int, ...], opts: DataOptions, spec, n_calib: int, seed: int, prog: Progress,
              num_classes: int | None = None, dtype: str = "float32") -> DataSets:
    """The user's data (--data, --calibration) as DataSets for inputs of ``shape`` (one sample); class
    folders without --labels must be as many as the model's ``num_classes`` (check_folder_classes);
    images come in the input's ``dtype``."""
    from .userdata import PreprocessSpec, check_folder_classes, load_data, split_eval_calibration

    images = spec is not None
    spec = spec or PreprocessSpec(source="not used: array inputs")
    prog.task(f"reading {opts.data}")
    data = load_data(opts.data, preprocess=spec, input_shape=shape, max_images=opts.max_images,
                     labels_file=opts.labels, progress=lambda done, total: None, seed=seed)
    data.images = _one_input(data.images, opts.data)
    check_folder_classes(data, num_classes, opts.data)
    if opts.calibration:
        calib = load_data(opts.calibration, preprocess=spec, input_shape=shape, seed=seed)
        calib.images = _one_input(calib.images, opts.calibration)
        ev = data
    else:
        ev, calib = split_eval_calibration(data, n_calib=min(n_calib, max(1, len(data) // 2)), seed=seed)
    if data.skipped:
        prog.warn(f"{data.skipped} file(s) in {opts.data} could not be decoded and were skipped "
                  f"(e.g. {'; '.join(data.skipped_examples[:2])})")
    cast = (lambda a: as_input_dtype(np.asarray(a), dtype)) if images else np.asarray  # arrays stay as given
    return DataSets(calibration=cast(calib.images), eval=cast(ev.images), eval_labels=ev.labels,
                    description=ev.description + (f"; all {len(ev)} evaluated; int8 calibration: "
                                                  f"{calib.description}" if opts.calibration else ""))


def _classes(um) -> int | None:
    """The class count of a one-output classifier (N x classes, a fixed size), else None."""
    shape = tuple(um.outputs[0].shape) if len(um.outputs) == 1 else ()
    return shape[1] if len(shape) == 2 and isinstance(shape[1], int) else None


def user_inputs(um, opts: DataOptions, parity_samples: int | None, calibration_samples: int | None, seed: int,
                prog: Progress) -> tuple[DataSets, Any]:
    """(DataSets, the preprocessing spec or None) for ``um``."""
    if not um.outputs:
        raise UsageError(f"{um.name} has no outputs: there is nothing to compare")
    if len(um.inputs) > 1 or opts.values or any(s.batch_axis != 0 for s in um.inputs):  # named arrays
        from .prepare_multi import several_inputs

        return several_inputs(um, opts, parity_samples, calibration_samples, seed, prog)
    spec = _image_spec(um, opts)
    if opts.data:
        return data_sets(tuple(um.inputs[0].sample()), opts, spec, calibration_samples or 64, seed, prog,
                         _classes(um), um.inputs[0].dtype), spec
    if spec is None:
        inp = um.inputs[0]
        raise UsageError(f"input '{inp.name}' {inp.dtype} {list(inp.shape)} is not an image: give --data FILE.npy "
                         "(or .npz) with real inputs")
    return bundled_photos(spec, parity_samples or 32, calibration_samples or 64, seed, um.inputs[0].dtype), spec


def prepare_multi_needed(um, opts: DataOptions) -> bool:
    """Inputs and outputs by name: several of them, given values, or a batch axis other than 0."""
    return len(um.inputs) > 1 or len(um.outputs) > 1 or bool(opts.values) or not um.layout().trivial()


def _data_shapes(path: str | None) -> dict[str, tuple[int, ...]]:
    """One sample's shape per array of a --data .npz ("" for a .npy): sizes the model's dynamic dimensions."""
    if not path or not str(path).lower().endswith((".npy", ".npz")) or not os.path.isfile(path):
        return {}
    try:
        with open(path, "rb") as f:
            got = np.load(f, mmap_mode=None, allow_pickle=False)
            if isinstance(got, np.ndarray):
                return {"": tuple(got.shape[1:])}
            return {k: tuple(got[k].shape[1:]) for k in got.files if k != "labels" and not k.startswith("reference")}
    except Exception:  # unreadable: load_data says why, once, with the file's name
        return {}


def _reference(cache: Cache, um, ds: DataSets) -> np.ndarray:
    from .models import reference_outputs

    def build(tmp):
        out = reference_outputs(um, {um.inputs[0].name: ds.eval})
        np.save(tmp / "reference.npy", np.asarray(out[um.outputs[0].name], dtype=np.float32))
        return {"n": int(len(ds.eval)), "output": um.outputs[0].name}

    key = {"user_model": um.sha256 or um.weights_hash, "kind": um.kind, "data": ds.digest()}
    return np.load(cache.get_or_build("reference", key, build).file("reference.npy"))


def _torch_root(um, cache: Cache) -> tuple[str, dict[str, Any]]:
    """(the root artifact file, the model spec that rebuilds the module from it) of a torch model."""
    spec: dict[str, Any] = {"name": um.name, "family": "user", "kind": um.kind, "source": um.source,
                            "cwd": os.getcwd()}
    if um.kind in ("torchscript", "exported_program"):
        return um.source, spec
    import torch

    if um.kind == "factory":
        def save_sd(tmp):
            torch.save(um.module.state_dict(), tmp / "state_dict.pt")
            return {}
        e = cache.get_or_build("weights", {"factory": um.source, "weights": um.weights_hash}, save_sd)
        return str(e.file("state_dict.pt")), spec

    def save_ep(tmp):  # a Python object: export it, so that child processes can load it again
        ep, batch = _exported(torch, um)
        torch.export.save(ep, str(tmp / "model.pt2"))
        return {"batch": batch}
    e = cache.get_or_build("weights", {"module": um.weights_hash, "torch": torch.__version__, "batch": "dynamic"},
                           save_ep)
    return str(e.file("model.pt2")), {**spec, "kind": "exported_program", "source": str(e.file("model.pt2"))}


def _exported(torch, um) -> tuple[Any, str]:
    """(the module's ExportedProgram, its batch): the first axis of every input dynamic (the batch sizes a
    comparison measures), else, where torch.export cannot make it so, the batch of 1."""
    example = tuple(torch.from_numpy(a) for a in um.example_inputs(2).values())
    dim = torch.export.Dim("batch", min=1, max=1024)
    try:
        return torch.export.export(um.module, example, dynamic_shapes=tuple({0: dim} for _ in example)), "dynamic"
    except Exception:  # e.g. a batch-dependent reshape: exported for batch 1, other batch sizes then fail their rows
        return torch.export.export(um.module, tuple(torch.from_numpy(a) for a in um.example_inputs(1).values())), "1"


def _model_info(um, ds: DataSets, ref: np.ndarray, spec) -> ModelInfo:
    classifier = ref.ndim == 2
    notes = list(um.notes) + ([f"reference: ONNX Runtime CPU FP32 on the user's file {um.source}"]
                              if um.kind == "onnx" else ["reference: PyTorch FP32 on the user's model"])
    if not classifier:
        notes.append(f"output {um.outputs[0].name} {list(ref.shape[1:])} is not [N, classes]: judged on the "
                     "error metrics (cosine, max abs and relative error), no top-1/top-5")
    return ModelInfo(um.name, f"user-{um.kind}", "file", um.source, (um.sha256 or um.weights_hash)[:16],
                     tuple(int(d) for d in um.inputs[0].sample()), int(ref.shape[1]) if classifier else 0,
                     spec.to_dict() if spec is not None else {}, False, classifier, tuple(notes))


def prepare_user_model(ref: Any, *, weights: str | None = None, input_shape: str | None = None,
                       example_input: Any = None, data: DataOptions | None = None, parity_samples: int | None = None,
                       calibration_samples: int | None = None, seed: int = 0, cache: Cache,
                       prog: Progress | None = None, warn: Callable[[str], None] = lambda m: None) -> Prepared:
    """The user's model, its inputs and its FP32 reference outputs, as a Prepared."""
    from .backends.exporter import file_size
    from .models import load_user_model, parse_input_shapes

    prog = prog or Progress()
    prog.task(f"loading {ref if isinstance(ref, str) else type(ref).__name__}")
    shapes = parse_input_shapes(input_shape) if input_shape else None
    data = data or DataOptions()
    um = load_user_model(ref, weights=weights, input_shapes=shapes, example_input=example_input,
                         data_shapes=_data_shapes(data.data))
    ds, spec = user_inputs(um, data, parity_samples, calibration_samples, seed, prog)
    prog.task("computing the FP32 reference outputs")
    several: dict[Any, Unbuilt] = {}
    if prepare_multi_needed(um, data):  # prepare_multi.py: every input and output by name
        from . import prepare_multi

        out = prepare_multi.reference(cache, um, ds)
        minfo = prepare_multi.model_info(um, out, spec, prepare_multi.input_sources(um, data, ds.description))
        several = prepare_multi.one_io_unbuilt(um)
    else:
        out = _reference(cache, um, ds)
        minfo = _model_info(um, ds, out, spec)
    notes = list(minfo.notes) + [f"inputs: {ds.description}"]
    if um.static_batch:
        notes.append(f"the model has a static batch of {um.static_batch}: other batch sizes are skipped rows")
    if um.kind == "onnx":
        rec = ExportRecord("onnx", "fp32", um.source, file_size(um.source), 0.0, True, key=um.sha256[:20],
                           notes=("the user's ONNX file, measured as given",))
        return Prepared(minfo, {"name": um.name, "family": "user", "kind": "onnx", "source": um.source},
                        minfo.preprocessing, ds, out, notes=notes, carried={("onnx", "fp32"): rec},
                        unbuilt={("pytorch", "fp32"): Unbuilt(SKIPPED, NEEDS_TORCH, NEEDS_TORCH_HINT), **several},
                        static_batch=um.static_batch)
    root, model_spec = _torch_root(um, cache)
    return Prepared(minfo, model_spec, minfo.preprocessing, ds, out, model=um.module, weights_path=root,
                    notes=notes, static_batch=um.static_batch, unbuilt=several)


def builtin_data_sets(spec, opts: DataOptions, calibration_samples: int | None, seed: int, prog: Progress) -> DataSets:
    """A built-in model on the user's data: its own transforms, with the user's overrides."""
    from .userdata import from_preprocess, preprocess_spec

    pre = preprocess_spec(from_preprocess(spec.preprocess, f"{spec.name}'s transforms"), **opts.overrides)
    return data_sets(tuple(spec.input_shape), opts, pre, calibration_samples or 64, seed, prog, spec.num_classes)
