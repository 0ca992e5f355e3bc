"""Before measuring: the inputs, the model and its FP32 reference outputs.

``prepare_model()`` does it from PyTorch (needs torch); a bundle does it from its files
(bundle/run.py). Either way measuring gets a :class:`Prepared`, which holds no torch
object it needs: the model itself is only there for exporters.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from infer_compare import models
from infer_compare.artifacts.chain import Key, ModelSource, Unbuilt
from infer_compare.base.cache import Cache
from infer_compare.base.progress import Progress
from infer_compare.base.records import ExportRecord, ModelInfo
from infer_compare.catalog import deps
from infer_compare.data import bundled as datamod
from infer_compare.prepare.flops import count_flops
from infer_compare.prepare.inputs import builtin_data_sets


@dataclass
class Prepared:
    minfo: ModelInfo
    model_spec: dict[str, Any]  # ModelSpec.as_dict(): runners that rebuild the model (PyTorch) read it
    preprocessing: dict[str, Any]
    ds: Any  # data.DataSets: eval (+ labels) for parity, calibration for int8 builds
    ref: Any  # np.ndarray: PyTorch FP32 reference outputs on ds.eval
    model: Any = None  # the torch module; None without torch (exporters then work from source files)
    weights_path: str | None = None
    weights_build_s: float = 0.0
    notes: list[str] = field(default_factory=list)
    # artifacts that exist already (a bundle's)
    carried: dict[Key, ExportRecord] = field(default_factory=dict)
    unbuilt: dict[Key, Unbuilt] = field(default_factory=dict)  # artifacts known to be unavailable
    static_batch: int | None = None  # the model requires this batch size (a user's static-batch model)
    # --output-kind: {output: kind} (parity/kinds.py)
    output_kinds: dict[str, str] = field(default_factory=dict)
    # "int8": the model file is already quantized; its rows are judged at that precision's tolerance
    file_precision: str = ""
    # a stream model (prepare/user_model.py): batch size -> its reference computed in groups of that size
    stream: Any = None

    def source(self) -> ModelSource:
        return ModelSource(self.minfo, self.weights_path, self.weights_build_s, self.ds.digest(),
                           dict(self.model_spec))


def prepare_model(model: str, *, weights: str = "auto", parity_samples: int | None = None,
                  calibration_samples: int | None = None, seed: int = 0, cache: Cache,
                  threads: int | None = None,
                  prog: Progress | None = None, warn: Callable[[str], None] = lambda m: None,
                  data: Any = None) -> Prepared:
    """Inputs (the bundled ones, or the user's: ``data``, a DataOptions), the PyTorch
    model and its FP32 reference outputs (needs torch)."""
    prog = prog or Progress()
    spec = models.resolve(model)
    prog.task(f"preparing {spec.name} inputs")
    if data is not None and data.data:
        ds = builtin_data_sets(spec, data, calibration_samples, seed, prog)
    elif spec.family == "lenet":
        ds = datamod.digit_sets(n_calib=calibration_samples or 200, seed=seed)
        if parity_samples is not None:
            ds.eval, ds.eval_labels = ds.eval[:parity_samples], ds.eval_labels[:parity_samples]
    else:
        ds = photo_sets_cached(cache, spec.preprocess, n_eval=parity_samples or 32,
                               n_calib=calibration_samples or 64, seed=seed)
    prog.task(f"loading {spec.name} weights ({weights})")
    import torch

    if threads is not None:
        torch.set_num_threads(int(threads))
    net, minfo, weights_path, weights_build_s = models.load(spec, weights, ds, cache, seed=seed, log=prog.log,
                                                            warn=warn)
    flops_per_image, flops_source = model_flops(cache, net, minfo.weights_hash, spec.input_shape)
    minfo = minfo.replace(flops_per_image=flops_per_image, flops_source=flops_source)
    prog.task("computing the PyTorch FP32 reference outputs")
    ref = reference_outputs(cache, net, minfo.weights_hash, ds)
    notes = list(minfo.notes) + [f"inputs: {ds.description}"]
    return Prepared(minfo, spec.as_dict(), spec.preprocess.as_dict(), ds, ref, model=net,
                    weights_path=weights_path, weights_build_s=weights_build_s, notes=notes)


def photo_sets_cached(cache: Cache, pre: Any, n_eval: int, n_calib: int, seed: int) -> Any:
    """``datamod.photo_sets`` through the cache: the crops of the bundled photos, keyed by the preprocessing,
    the counts, the seed, the photos' names and the versions of the libraries that decode and resize them.
    Decoding, cropping and resizing them (and importing scikit-image and scikit-learn) took 2.8 s of each warm
    run's preparation on the 2 x H100 host; the cached arrays are the same bytes."""
    import json

    import numpy as np  # deferred: the CLI's start stays light without it

    def build(tmp):
        ds = datamod.photo_sets(pre, n_eval=n_eval, n_calib=n_calib, seed=seed)
        np.save(tmp / "eval.npy", ds.eval)
        np.save(tmp / "calibration.npy", ds.calibration)
        (tmp / "about.json").write_text(json.dumps({"description": ds.description, "sources": ds.sources}))
        return {"n_eval": n_eval, "n_calib": n_calib}

    parts = {"preprocess": pre.as_dict(), "n_eval": n_eval, "n_calib": n_calib, "seed": seed, "v": 1,
             "photos": [list(datamod.EVAL_PHOTOS), list(datamod.CALIB_PHOTOS)],
             "libraries": {m: deps.version(m) for m in ("numpy", "PIL", "skimage", "sklearn")}}
    try:
        e = cache.get_or_build("inputs", parts, build)
        about = json.loads(e.file("about.json").read_text())
        return datamod.DataSets(calibration=np.load(e.file("calibration.npy")),
                                eval=np.load(e.file("eval.npy")), description=about["description"],
                                sources=about["sources"])
    except (OSError, ValueError, KeyError):  # an entry that cannot be read: built here, as without a cache
        return datamod.photo_sets(pre, n_eval=n_eval, n_calib=n_calib, seed=seed)


def model_flops(cache: Cache, net, weights_hash: str, input_shape) -> tuple[float | None, str]:
    """FLOPs per image (flops.count_flops), through the cache: counting runs the model once (1-2 s)."""
    import json

    import torch

    def build(tmp):
        flops, source = count_flops(net, input_shape)
        (tmp / "flops.json").write_text(json.dumps({"flops": flops, "source": source}))
        return {}

    try:
        e = cache.get_or_build("flops", {"weights": weights_hash, "input": list(input_shape),
                                         "torch": torch.__version__}, build)
        got = json.loads(e.file("flops.json").read_text())
        return got["flops"], got["source"]
    except (OSError, ValueError, KeyError):
        return count_flops(net, input_shape)


def reference_outputs(cache: Cache, net, weights_hash: str, ds):
    """PyTorch FP32 outputs on ``ds.eval``, through the cache."""
    import numpy as np
    import torch

    def build(tmp):
        outs = []
        with torch.inference_mode():
            for i in range(0, len(ds.eval), 16):
                outs.append(net(torch.from_numpy(ds.eval[i:i + 16])).float().numpy())
        np.save(tmp / "reference.npy", np.concatenate(outs))
        return {"n": int(len(ds.eval))}

    e = cache.get_or_build("reference", {"weights": weights_hash, "data": ds.digest(),
                                         "torch": torch.__version__}, build)
    return np.load(e.file("reference.npy"))
