"""Model registry: ResNet-50, MobileNet v2 / v3-large, LeNet-5, and any torchvision

Enters: a model name, file or factory. Leaves: a torch module with its ModelInfo, or the description
of the user's model (user.py). May import: data, parity, host, catalog, base (never a runtime).
classification model by name. The user's own models (ONNX, TorchScript, ExportedProgram,
factories, modules) are in ``user.py``; its public names are exported here.

Weights (``--weights``):
  auto    pretrained torchvision weights when they are already in the local torch hub
          cache; otherwise seeded random weights, with a loud warning. LeNet-5: trained
          on scikit-learn's digits on first use, then cached.
  random  seeded random weights.
  PATH    a state dict saved with ``torch.save(model.state_dict(), PATH)``.

Random weights give useless comparisons when left as they are (MobileNets output
~1e-9, ResNet-50 picks one class for every input), so BatchNorm statistics are
re-estimated on the bundled calibration photos, which makes outputs depend on the
input. Top-1 margins stay tiny, so top-1 agreement is not judged for such weights.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from infer_compare.base.cache import Cache
from infer_compare.base.errors import UsageError
from infer_compare.base.records import ModelInfo
from infer_compare.catalog import deps
from infer_compare.data.bundled import DataSets, Preprocess
from infer_compare.models import lenet
from infer_compare.models import torchvision_zoo as tvz
from infer_compare.models.loaded import with_state_dict
from infer_compare.models.user import TensorSpec as TensorSpec  # the user's own models: see user.py
from infer_compare.models.user import UserModel as UserModel
from infer_compare.models.user import looks_like_user_model as looks_like_user_model
from infer_compare.models.user import parse_input_shapes as parse_input_shapes
from infer_compare.models.user import state_dict_hash as state_dict_hash  # the weights' hash in reports
from infer_compare.models.user_torch import as_state_dict, import_callable, load_weights, weights_only_load
from infer_compare.models.user_torchfile import load_exported_module

BUILTIN = ("resnet50", "mobilenet_v2", "mobilenet_v3_large", "lenet5")
ALIASES = {"lenet": "lenet5", "lenet-5": "lenet5", "lenet_5": "lenet5", "resnet-50": "resnet50",
           "mobilenetv2": "mobilenet_v2", "mobilenet-v2": "mobilenet_v2",
           "mobilenetv3": "mobilenet_v3_large", "mobilenet_v3": "mobilenet_v3_large",
           "mobilenet-v3-large": "mobilenet_v3_large"}


@dataclass(frozen=True)
class ModelSpec:
    name: str
    family: str  # "torchvision" or "lenet"
    input_shape: tuple[int, int, int]
    num_classes: int
    preprocess: Preprocess

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "family": self.family, "input_shape": list(self.input_shape),
                "num_classes": self.num_classes}


def resolve(name: str) -> ModelSpec:
    """Name -> spec; an unknown name is a UsageError that suggests the closest one."""
    key = ALIASES.get(name.strip().lower(), name.strip())
    if key == "lenet5":
        return ModelSpec("lenet5", "lenet", (1, 32, 32), 10, Preprocess(kind="digits", resize=32, crop=32,
                                                                         mean=(0.0,), std=(1.0,), channels=1))
    if not deps.has("torchvision"):
        raise UsageError(f"model '{name}' needs torchvision: {deps.hint('torchvision')}")

    names = tvz.classification_names()
    if key not in names:
        close = difflib.get_close_matches(key.lower(), list(BUILTIN) + names, n=3, cutoff=0.5)
        sugg = f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
        raise UsageError(f"unknown model '{name}'{sugg} (built in: {', '.join(BUILTIN)}; "
                         "or any torchvision classification model name)")
    pre = tvz.preprocessing(key)
    p = Preprocess(kind="imagenet", **pre)
    return ModelSpec(key, "torchvision", (3, p.crop, p.crop), 1000, p)


def build_architecture(spec: dict[str, Any] | ModelSpec):
    """An untrained module of the right architecture (used by the PyTorch runner too)."""
    s = spec.as_dict() if isinstance(spec, ModelSpec) else spec
    if s["family"] == "lenet":
        return lenet.build()

    return tvz.build(s["name"], int(s.get("num_classes", 1000)))


RECEIVED = "received"  # set (True) by bundle/run.py on the spec of a received bundle: never read from a file


def received_spec(spec: dict[str, Any]) -> dict[str, Any]:
    """A received bundle's model spec, rebuilt from its data-only fields (a manifest's own keys are never
    passed on): what ``rebuild`` turns into a module by ``rebuild_received``, never by the user's code."""
    out: dict[str, Any] = {k: spec[k] for k in ("name", "family", "kind", "input_shape", "num_classes")
                           if k in spec}
    out[RECEIVED] = True
    return out


def rebuild_received(spec: dict[str, Any], path: str):
    """The module of a received bundle's PyTorch artifact, from data only: a built-in architecture the
    installed tool knows, with the weights-only state dict at ``path``, or an ExportedProgram loaded with
    ``weights_only`` forced and pickle refused. Nothing is imported by name, no TorchScript is loaded, no
    factory called: anything else is a UsageError."""
    family, kind, name = spec.get("family"), spec.get("kind"), str(spec.get("name"))
    if family == "user" and kind == "exported_program":
        return load_exported_module(path)
    if family == "lenet" and name == "lenet5" or family == "torchvision" and name in _torchvision_names():
        sd = as_state_dict(weights_only_load(path))
        if sd is None:
            raise UsageError(f"{path} holds no state dict (a mapping of parameter names to tensors)")
        built = {"name": name, "family": family, "num_classes": int(spec.get("num_classes") or 1000)}
        return with_state_dict(lambda: build_architecture(built), sd).eval()
    raise UsageError(f"a received bundle's PyTorch model is a {family} {kind or name}: bundles carry a "
                     "built-in model's state dict or an ExportedProgram, never code; refused")


def _torchvision_names() -> list[str]:
    return tvz.classification_names() if deps.has("torchvision") else []


def rebuild(spec: dict[str, Any], path: str):
    """The eval-mode module that ``spec`` (a model spec) and its root artifact ``path`` describe, in any
    process: a built-in architecture with the state dict at ``path``; the user's TorchScript or .pt2
    file; a user factory called again with the state dict at ``path`` (the user's own command line only:
    a received bundle's spec goes to ``rebuild_received``, data only)."""
    import torch

    if spec.get(RECEIVED) or spec.get("family") not in ("user", "lenet", "torchvision"):
        return rebuild_received(spec, path)
    if spec.get("family") != "user":  # built without the random initialisation the state dict replaces
        sd = torch.load(path, map_location="cpu", weights_only=True)
        return with_state_dict(lambda: build_architecture(spec), sd).eval()
    kind = spec.get("kind")
    if kind == "torchscript":
        return torch.jit.load(path, map_location="cpu").eval()
    if kind == "exported_program":
        return load_exported_module(path)
    if kind == "factory":
        import sys

        if spec.get("cwd") and spec["cwd"] not in sys.path:  # where the user's module was importable
            sys.path.insert(0, spec["cwd"])

        model = import_callable(spec["source"])()
        load_weights(model, path)
        return model.eval()
    raise UsageError(f"a {kind} model cannot be rebuilt from {path}")


def _read_state_dict(path: str):
    import torch

    if not os.path.exists(path):
        raise UsageError(f"weights file not found: {path}")
    try:
        obj = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:
        first = (str(e).strip().splitlines() or [type(e).__name__])[0]
        raise UsageError(f"cannot read weights file {path}: {first[:200]}") from None
    if isinstance(obj, dict):
        for k in ("state_dict", "model_state_dict", "model"):
            if k in obj and isinstance(obj[k], dict):
                obj = obj[k]
                break
    if not isinstance(obj, dict) or not obj:
        raise UsageError(f"weights file {path} holds no state dict")
    return obj


def _recalibrate_bn(model, calib, log) -> int:
    import torch

    bns = [m for m in model.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
    if not bns:
        return 0
    for m in bns:
        m.reset_running_stats()
        m.momentum = None  # cumulative average over all batches
    model.train()
    x = torch.from_numpy(calib)
    with torch.no_grad():
        for i in range(0, len(x), 16):
            model(x[i:i + 16])
    model.eval()
    log(f"re-estimated {len(bns)} BatchNorm layers on {len(x)} calibration crops")
    return len(bns)


def _from_file(spec: ModelSpec, path: str):
    sd = _read_state_dict(path)
    model = build_architecture(spec)
    try:
        model.load_state_dict(sd)
    except RuntimeError as e:
        raise UsageError(f"weights file {path} does not fit {spec.name}: "
                         f"{str(e).splitlines()[0][:200]}") from None
    model.eval()
    info = ModelInfo(spec.name, spec.family, "file", os.path.abspath(path),
                     state_dict_hash(model.state_dict()), spec.input_shape, spec.num_classes,
                     spec.preprocess.as_dict(), False, True, ("weights loaded from the user's file",))
    return model, info, os.path.abspath(path), 0.0


def _from_entry(spec: ModelSpec, entry, build):
    """The module built by ``build()`` with the cache entry's state dict loaded, in eval mode."""
    import torch

    return with_state_dict(build, torch.load(entry.file("state_dict.pt"), weights_only=True)).eval()


def _lenet_trained(spec: ModelSpec, data: DataSets, cache: Cache, seed: int, torch_mm: str, log):
    import torch

    def build_trained(tmp):
        torch.manual_seed(seed)
        m = lenet.build()
        log("training LeNet-5 on scikit-learn digits (first use; cached afterwards)")
        stats = lenet.train(m, data.train, data.train_labels, seed=seed, log=log)
        torch.save(m.state_dict(), tmp / "state_dict.pt")
        return stats

    entry = cache.get_or_build("weights", {"model": "lenet5", "recipe": lenet.RECIPE, "seed": seed,
                                           "torch": torch_mm, "data": data.digest()}, build_trained)
    model = _from_entry(spec, entry, lenet.build)
    notes = (f"trained on scikit-learn digits ({entry.manifest.get('epochs')} epochs, "
             f"{entry.manifest.get('train_s')} s{', cached' if entry.hit else ''})",)
    info = ModelInfo(spec.name, spec.family, "trained", str(entry.path), state_dict_hash(model.state_dict()),
                     spec.input_shape, spec.num_classes, spec.preprocess.as_dict(), False, True, notes)
    return model, info, str(entry.file("state_dict.pt")), float(entry.manifest.get("build_s", 0.0))


def _lenet_random(spec: ModelSpec, cache: Cache, seed: int, torch_mm: str, warn):
    import torch

    torch.manual_seed(seed)
    model = build_architecture(spec).eval()
    warn(f"{spec.name}: seeded random weights (seed {seed}); accuracy is chance level")
    path = _save_plain(cache, spec, model, seed, torch_mm)
    info = ModelInfo(spec.name, spec.family, "random", f"seed {seed}", state_dict_hash(model.state_dict()),
                     spec.input_shape, spec.num_classes, spec.preprocess.as_dict(), False, False,
                     (f"seeded random weights (seed {seed})",))
    return model, info, path, 0.0


def _pretrained(spec: ModelSpec, warn, seed: int):
    """The torchvision weights already in the local hub cache, or None (after the loud warning)."""
    path, looked = tvz.cached_weights_file(spec.name)
    if path is None:
        warn(f"{spec.name}: no pretrained weights in the local cache ({looked}); using SEEDED RANDOM weights "
             f"(seed {seed}) with BatchNorm statistics re-estimated on bundled photos. Latency is real; "
             "accuracy is meaningless and top-1 agreement is not judged.")
        return None
    model = with_state_dict(lambda: build_architecture(spec), _read_state_dict(path)).eval()
    w = tvz.default_weights(spec.name)
    info = ModelInfo(spec.name, spec.family, "pretrained", f"{w} ({path})",
                     state_dict_hash(model.state_dict()), spec.input_shape, spec.num_classes,
                     spec.preprocess.as_dict(), False, True, (f"pretrained torchvision weights {w}",))
    return model, info, path, 0.0


def _random_bn(spec: ModelSpec, data: DataSets, cache: Cache, seed: int, torch_mm: str, log):
    """Seeded random weights with BatchNorm statistics re-estimated on the calibration crops."""
    import torch

    def build_random(tmp):
        torch.manual_seed(seed)
        m = build_architecture(spec)
        n = _recalibrate_bn(m, data.calibration, log)
        torch.save(m.state_dict(), tmp / "state_dict.pt")
        return {"bn_layers": n}

    log(f"building {spec.name} with seeded random weights")
    entry = cache.get_or_build("weights", {"model": spec.name, "seed": seed, "torch": torch_mm,
                                           "bn_recal": True, "data": data.digest()}, build_random)
    model = _from_entry(spec, entry, lambda: build_architecture(spec))
    recal = bool(entry.manifest.get("bn_layers"))
    notes = [f"seeded random weights (seed {seed})"]
    if recal:
        notes.append(f"BatchNorm statistics re-estimated on {len(data.calibration)} calibration crops so "
                     "that outputs depend on the input; top-1 margins stay tiny, so top-1 agreement and int8 "
                     "parity are reported, not judged")
    info = ModelInfo(spec.name, spec.family, "random", f"seed {seed}", state_dict_hash(model.state_dict()),
                     spec.input_shape, spec.num_classes, spec.preprocess.as_dict(), recal, False,
                     tuple(notes))
    return model, info, str(entry.file("state_dict.pt")), float(entry.manifest.get("build_s", 0.0))


def load(spec: ModelSpec, weights: str, data: DataSets, cache: Cache, seed: int = 0,
         log: Callable[[str], None] = lambda m: None, warn: Callable[[str], None] = lambda m: None):
    """Return (eval-mode module, ModelInfo, weights file path, weights build seconds)."""
    deps.require("torch", "building the model")
    import torch

    torch_mm = ".".join(torch.__version__.split(".")[:2])
    if weights not in ("auto", "random"):
        return _from_file(spec, weights)
    if spec.family == "lenet":
        if weights == "auto":
            return _lenet_trained(spec, data, cache, seed, torch_mm, log)
        return _lenet_random(spec, cache, seed, torch_mm, warn)
    got = _pretrained(spec, warn, seed) if weights == "auto" else None
    return got if got is not None else _random_bn(spec, data, cache, seed, torch_mm, log)


def _save_plain(cache: Cache, spec: ModelSpec, model, seed: int, torch_mm: str) -> str:
    import torch

    def b(tmp):
        torch.save(model.state_dict(), tmp / "state_dict.pt")
        return {}

    e = cache.get_or_build("weights", {"model": spec.name, "seed": seed, "torch": torch_mm,
                                       "bn_recal": False}, b)
    return str(e.file("state_dict.pt"))


def with_preprocess(spec: ModelSpec, **kw) -> ModelSpec:
    return replace(spec, preprocess=replace(spec.preprocess, **kw))
