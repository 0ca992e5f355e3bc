"""Preparing the user's own model: an ONNX file, a TorchScript file, an ExportedProgram,
a ``package.module:callable`` factory or a ``torch.nn.Module`` object (models/user.py),
on the user's data (``--data``: an ImageFolder, a flat folder of images, .npy/.npz
arrays; data/user/) or, for an image input, the bundled photos.

The result is the same :class:`~infer_compare.prepare.prepared.Prepared` that built-in models
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
from dataclasses import replace
from typing import Any

import numpy as np

from infer_compare.artifacts.chain import Unbuilt
from infer_compare.backends.exporter import file_size
from infer_compare.base.cache import Cache
from infer_compare.base.errors import UsageError
from infer_compare.base.progress import Progress
from infer_compare.base.records import SKIPPED, ExportRecord, ModelInfo
from infer_compare.catalog.formats import TRT_INT8
from infer_compare.data.bundled import DataSets
from infer_compare.models import parse_input_shapes, torchvision_det
from infer_compare.models.user_onnx import quantized_ops
from infer_compare.prepare import multi
from infer_compare.prepare.inputs import DataOptions, _image_spec, bundled_photos, data_sets
from infer_compare.prepare.multi import input_sources, several_inputs, tensor_info
from infer_compare.prepare.prepared import Prepared
from infer_compare.prepare.tflite_file import root_artifacts
from infer_compare.prepare.user_model import load_user_model, reference_note, stream_reference
from infer_compare.prepare.user_model import reference_of as reference_outputs

NEEDS_TORCH = ("the model arrived as ONNX: PyTorch rows need the PyTorch model "
               "(TFLite and the Edge TPU are converted from the ONNX file: onnx2torch, then litert-torch)")
NEEDS_TORCH_HINT = "give the PyTorch model: --model package.module:factory, a TorchScript file or a .pt2 file"


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

        return several_inputs(um, opts, parity_samples, calibration_samples, seed, prog)
    spec = _image_spec(um, opts)
    if opts.data:
        return data_sets(tuple(um.inputs[0].sample()), opts, spec, calibration_samples or 64, seed, prog,
                         _classes(um), um.inputs[0].dtype), spec
    if spec is None:
        inp = um.inputs[0]
        raise UsageError(f"input '{inp.name}' {inp.dtype} {list(inp.shape)} is not an image: give --data "
                         "FILE.npy (or .npz) with real inputs")
    return (bundled_photos(spec, parity_samples or 32, calibration_samples or 64, seed, um.inputs[0].dtype),
            spec)


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
            return {k: tuple(got[k].shape[1:])
                    for k in got.files if k != "labels" and not k.startswith("reference")}
    except Exception:  # unreadable: load_data says why, once, with the file's name
        return {}


def _reference(cache: Cache, um, ds: DataSets) -> np.ndarray:
    def build(tmp):
        out = reference_outputs(um, {um.inputs[0].name: ds.eval})
        np.save(tmp / "reference.npy", np.asarray(out[um.outputs[0].name], dtype=np.float32))
        return {"n": int(len(ds.eval)), "output": um.outputs[0].name,
                "output_batch_axes": {s.name: s.batch_axis for s in um.outputs}}

    key = {"user_model": um.sha256 or um.weights_hash, "kind": um.kind, "data": ds.digest(), "axes": 1}
    entry = cache.get_or_build("reference", key, build)
    axes = entry.manifest.get("output_batch_axes") or {}  # as the reference run found them (base/layout.py)
    um.outputs = tuple(replace(s, batch_axis=axes.get(s.name, s.batch_axis)) for s in um.outputs)
    return np.load(entry.file("reference.npy"))


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
    e = cache.get_or_build("weights", {"module": um.weights_hash, "torch": torch.__version__,
                                       "batch": "dynamic"}, save_ep)
    return str(e.file("model.pt2")), {**spec, "kind": "exported_program", "source": str(e.file("model.pt2"))}


def _exported(torch, um) -> tuple[Any, str]:
    """(the module's ExportedProgram, its batch): the first axis of every input dynamic (the batch sizes a
    comparison measures), else, where torch.export cannot make it so, the batch of 1."""
    example = tuple(torch.from_numpy(a) for a in um.example_inputs(2).values())
    dim = torch.export.Dim("batch", min=1, max=1024)
    try:
        return (torch.export.export(um.module, example, dynamic_shapes=tuple({0: dim} for _ in example)),
                "dynamic")
    except Exception:
        # e.g. a batch-dependent reshape: exported for batch 1, other batch sizes then fail their rows
        return (torch.export.export(um.module,
                                    tuple(torch.from_numpy(a) for a in um.example_inputs(1).values())),
                "1")


def _model_info(um, ds: DataSets, ref: np.ndarray, spec, sources: dict[str, str]) -> ModelInfo:
    """The ModelInfo of a one-input, one-output model: its input listed with shape, batch axis and source."""
    classifier = ref.ndim == 2
    notes = list(um.notes) + [reference_note(um)]
    return ModelInfo(um.name, f"user-{um.kind}", "file", um.source, (um.sha256 or um.weights_hash)[:16],
                     tuple(int(d) for d in um.inputs[0].sample()), int(ref.shape[1]) if classifier else 0,
                     spec.to_dict() if spec is not None else {}, False, True, tuple(notes),
                     inputs=tuple({**tensor_info(s), "source": sources.get(s.name, "")} for s in um.inputs))


# the artifacts a quantized ONNX file is not converted to: its fp16 and int8 files (and those built from them)
_FROM_QUANTIZED = (("onnx", "fp16"), ("onnx", "int8"), ("onnx", TRT_INT8), ("openvino", "fp16"),
                   ("openvino", "int8"), ("tensorrt", "fp16"), ("tensorrt", "int8"), ("tflite", "fp32"),
                   ("tflite", "fp16"), ("tflite", "int8"), ("edgetpu", "int8"))


def _already_quantized(um, notes: list[str]) -> dict[Any, Unbuilt]:
    """An ONNX file that is already quantized (integer or dynamic-quantization operators) is measured as it
    is; converting it again to fp16 or int8 is refused in one line (skipped rows), and the notes say so."""
    found = quantized_ops(um.source)
    if not found:
        return {}
    ops = ", ".join(f"{op} x{n}" for op, n in found.items())
    why = (f"the file is already quantized ({ops}): it is measured as it is (its onnx fp32 rows run its "
           "integer kernels); converting it to fp16 or quantizing it again is refused")
    notes.append(f"{os.path.basename(um.source)} is already quantized ({ops}): its 'fp32' rows run it as it "
                 "is, integer kernels included, and are judged at the int8 tolerance (each runtime quantizes "
                 "dynamically its own way); no fp16 or int8 file is made from it")
    return {key: Unbuilt(SKIPPED, why, "give the float model to compare fp16 and int8 builds", "unsupported")
            for key in _FROM_QUANTIZED}


def prepare_user_model(ref: Any, *, weights: str | None = None, input_shape: str | None = None,
                       example_input: Any = None, data: DataOptions | None = None,
                       parity_samples: int | None = None, calibration_samples: int | None = None,
                       seed: int = 0, cache: Cache, prog: Progress | None = None,
                       warn: Callable[[str], None] = lambda m: None) -> Prepared:
    """The user's model, its inputs and its FP32 reference outputs, as a Prepared."""
    prog = prog or Progress()
    prog.task(f"loading {ref if isinstance(ref, str) else type(ref).__name__}")
    shapes = parse_input_shapes(input_shape) if input_shape else None
    data = data or DataOptions()
    um = load_user_model(ref, weights=weights, input_shapes=shapes, example_input=example_input,
                         data_shapes=_data_shapes(data.data))
    um, kinds = torchvision_det.adapt(um, cache) if um.kind == "onnx" else (um, {})
    if kinds:  # torchvision's detection models take 0-1 pixels and normalize inside
        data = replace(data, overrides={"mean": "0", "std": "1", **data.overrides})
    ds, spec = user_inputs(um, data, parity_samples, calibration_samples, seed, prog)
    prog.task("computing the FP32 reference outputs")
    several: dict[Any, Unbuilt] = {}
    if prepare_multi_needed(um, data):  # prepare/multi.py: every input and output by name

        out = multi.reference(cache, um, ds)
        minfo = multi.model_info(um, out, spec, multi.input_sources(um, data, ds.description), kinds)
    else:
        out = _reference(cache, um, ds)
        minfo = _model_info(um, ds, out, spec, input_sources(um, data, ds.description))
        if not um.layout().trivial():  # the run found the output batched off axis 0: by name, as it really is
            out = multi.reference(cache, um, ds)
            minfo = multi.model_info(um, out, spec, multi.input_sources(um, data, ds.description))
    notes = list(minfo.notes) + [f"inputs: {ds.description}"]
    stream = stream_reference(um, ds.eval if isinstance(ds.eval, dict) else {um.inputs[0].name: ds.eval}, out,
                              notes)
    if um.static_batch:
        notes.append(f"the model has a static batch of {um.static_batch}: other batch sizes are skipped rows")
    if um.kind == "onnx":
        rec = ExportRecord("onnx", "fp32", um.source, file_size(um.source), 0.0, True, key=um.sha256[:20],
                           notes=("the user's ONNX file, measured as given",))
        refused = _already_quantized(um, notes)
        return Prepared(minfo, {"name": um.name, "family": "user", "kind": "onnx", "source": um.source},
                        minfo.preprocessing, ds, out, notes=notes, carried={("onnx", "fp32"): rec},
                        unbuilt={("pytorch", "fp32"): Unbuilt(SKIPPED, NEEDS_TORCH, NEEDS_TORCH_HINT),
                                 **refused, **several},
                        static_batch=um.static_batch, file_precision="int8" if refused else "", stream=stream,
                        output_kinds=kinds)
    if um.kind == "tflite":  # a TFLite file as the model: it is the tflite artifact of its own precision

        carried, unbuilt = root_artifacts(um)
        return Prepared(minfo, {"name": um.name, "family": "user", "kind": "tflite", "source": um.source},
                        minfo.preprocessing, ds, out, notes=notes, carried=carried,
                        unbuilt={**unbuilt, **several}, static_batch=um.static_batch)
    root, model_spec = _torch_root(um, cache)
    return Prepared(minfo, model_spec, minfo.preprocessing, ds, out, model=um.module, weights_path=root,
                    notes=notes, static_batch=um.static_batch, unbuilt=several, stream=stream)
