"""The user's PyTorch model as a factory (``package.module:callable``) or a ``torch.nn.Module``
object, and what every torch kind shares: eval mode, the example run that gives the output
specs, the weights-only reading of state dicts, the reference runner. Files (TorchScript,
ExportedProgram) are in ``user_torchfile.py``; the public API is in ``user.py``.

Nothing is unpickled beyond ``torch.load(weights_only=True)``: a file that needs more (a
pickled whole model) is refused without running any of it.
"""

from __future__ import annotations

import importlib
import inspect
import os
import pickle
import re
import sys
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from infer_compare.base.errors import UsageError
from infer_compare.catalog import deps
from infer_compare.models.user import (
    SHAPE_HELP,
    TensorSpec,
    UserModel,
    first_line,
    fmt_shape,
    match_names,
    sha256_files,
    state_dict_hash,
)

SAVE_HINT = ("save a supported form instead: torch.jit.save(torch.jit.script(m), 'm.pt'), "
             "torch.export.save(torch.export.export(m, (x,)), 'm.pt2'), or "
             "torch.save(m.state_dict(), 'w.pt') with --model package.module:factory --weights w.pt")


def require_torch():
    return deps.require("torch", "loading a PyTorch model")


def np_dtype(dtype) -> str:
    return str(dtype).replace("torch.", "")


# ---------------------------------------------------------------- weights-only reading


def refusal(path: str, e: BaseException) -> UsageError:
    what = re.search(r"(?:GLOBAL|Unsupported class) ([\w.]+)", str(e))
    held = f"it holds the Python object {what.group(1)}" if what else "it holds Python objects"
    return UsageError(f"refusing to unpickle {path}: {held} (a pickled whole model?), and loading it could "
                      f"run arbitrary code; {SAVE_HINT}")


def weights_only_load(path: str) -> Any:
    """``torch.load(path, weights_only=True)``; a file needing more is refused, unread."""
    torch = require_torch()
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as e:
        if "weights only" in str(e).lower() or "weightsunpickler" in str(e).lower():
            raise refusal(path, e) from None
        raise UsageError(f"cannot read {path}: {first_line(e)}") from None
    except Exception as e:
        raise UsageError(f"cannot read {path}: {type(e).__name__}: {first_line(e)}") from None


def as_state_dict(obj: Any) -> dict[str, Any] | None:
    """The state dict in ``obj`` (also under "state_dict" / "model_state_dict" / "model"), else None."""
    torch = require_torch()
    if isinstance(obj, Mapping):
        for k in ("state_dict", "model_state_dict", "model"):
            if isinstance(obj.get(k), Mapping):
                obj = obj[k]
                break
    if isinstance(obj, Mapping) and obj and all(isinstance(v, torch.Tensor) for v in obj.values()):
        return dict(obj)
    return None


# ---------------------------------------------------------------- factories and modules


def import_callable(ref: str):
    mod_name, _, attr = ref.partition(":")
    cwd = os.getcwd()
    if cwd not in sys.path:
        sys.path.insert(0, cwd)
    try:
        obj = importlib.import_module(mod_name)
    except Exception as e:
        raise UsageError(f"cannot import module '{mod_name}' (--model {ref}): {type(e).__name__}: "
                         f"{first_line(e)}") from None
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise UsageError(f"module '{mod_name}' has no attribute '{attr}' (--model {ref})")
        obj = getattr(obj, part)
    if not callable(obj):
        raise UsageError(f"{ref} is a {type(obj).__name__}, not a callable that returns a torch.nn.Module")
    return obj


def load_weights(module, path: str) -> str:
    """Load a state dict file (weights_only) into ``module``; returns the file's sha256."""
    p = os.path.expanduser(path)
    if not os.path.isfile(p):
        raise UsageError(f"weights file not found: {path}")
    sd = as_state_dict(weights_only_load(p))
    if sd is None:
        raise UsageError(f"--weights {path} holds no state dict (a mapping of parameter names to tensors)")
    try:
        res = module.load_state_dict(sd, strict=False)
    except RuntimeError as e:
        lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
        raise UsageError(f"--weights {path} does not fit the model: "
                         f"{(lines[1:] or lines or ['?'])[0][:300]}") from None
    if res.missing_keys or res.unexpected_keys:
        which = (f"missing key '{res.missing_keys[0]}'" if res.missing_keys
                 else f"unexpected key '{res.unexpected_keys[0]}'")
        raise UsageError(f"--weights {path} does not fit the model: {which} "
                         f"({len(res.missing_keys)} missing, {len(res.unexpected_keys)} unexpected)")
    return sha256_files([p])


def from_factory(ref: str, weights: str | None, input_shapes, example_input) -> UserModel:
    """``package.module:callable`` called with no arguments; optional ``--weights`` state dict."""
    torch = require_torch()
    fn = import_callable(ref)
    try:
        module = fn()
    except Exception as e:
        raise UsageError(f"calling {ref}() failed: {type(e).__name__}: {first_line(e)}") from None
    if not isinstance(module, torch.nn.Module):
        raise UsageError(f"{ref}() returned {_describe(module)}, not a torch.nn.Module")
    notes = [f"built by {ref}()"]
    sha = ""
    if weights is not None:
        sha = load_weights(module, weights)
        notes.append(f"weights from {os.path.abspath(os.path.expanduser(weights))} (weights_only)")
    return described("factory", ref, sha, module, input_shapes, example_input, notes, ref)


def from_module(obj: Any, example_input, input_shapes, weights: str | None) -> UserModel:
    """A ``torch.nn.Module`` object (Python API); ``example_input`` is required."""
    torch = require_torch()
    if not isinstance(obj, torch.nn.Module):
        raise UsageError(f"model must be a name, a model file, package.module:callable or a torch.nn.Module, "
                         f"not {_describe(obj)}")
    if example_input is None:
        raise UsageError(f"a torch.nn.Module model ({type(obj).__name__}) needs example_input= (a tensor or "
                         "a tuple of tensors)")
    sha = load_weights(obj, weights) if weights is not None else ""
    notes = [f"torch.nn.Module object {type(obj).__name__}"]
    return described("module", "<python object>", sha, obj, input_shapes, example_input, notes,
                      type(obj).__name__)


def _describe(obj: Any) -> str:
    text = repr(obj)
    return f"{type(obj).__name__} {text[:60]}" if len(text) <= 60 else f"a {type(obj).__name__}"


# ---------------------------------------------------------------- shared


def as_tensors(torch, example) -> list:
    items = list(example) if isinstance(example, tuple | list) else [example]
    if not items or not all(isinstance(t, torch.Tensor) for t in items):
        raise UsageError("example_input must be a tensor or a tuple of tensors")
    return [t.detach().cpu() for t in items]


def forward_args(module) -> list[str]:
    """The argument names of ``forward`` (TorchScript schema or Python signature); [] if unknown."""
    try:
        return [a.name for a in module.forward.schema.arguments[1:]]
    except (AttributeError, RuntimeError):
        pass
    try:
        params = list(inspect.signature(module.forward).parameters.values())
    except (TypeError, ValueError):
        return []
    if any(p.kind == inspect.Parameter.VAR_POSITIONAL for p in params):
        return []
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return [p.name for p in params if p.kind in kinds]


def input_names(module, n: int) -> list[str]:
    """Names for ``n`` positional inputs: forward's first ``n`` arguments, else input_<i>."""
    names = forward_args(module)[:n]
    return names + [f"input_{i}" for i in range(len(names), n)]


def _shapes_by_name(module, input_shapes, what: str) -> dict[str, tuple[int, ...]]:
    """The user's shapes keyed by forward's first arguments, in forward's order."""
    args = forward_args(module)
    given = dict(input_shapes)
    if None in given:
        if len(given) > 1:
            raise UsageError(f"--input-shape: name each input when giving several ({SHAPE_HELP})")
        return {(args or ["input"])[0]: tuple(given[None])}
    if not args:
        return {str(k): tuple(v) for k, v in given.items()}
    shapes = match_names(args, given, what)
    first = args[:len(shapes)]
    if set(first) != set(shapes):
        raise UsageError(f"--input-shape gives {', '.join(shapes)}, but {what}'s inputs are forward's first "
                         f"arguments ({', '.join(first)}, in order)")
    return {n: shapes[n] for n in first}


def _example_from_shapes(torch, module, input_shapes, what: str, notes: list[str]):
    if not input_shapes:
        raise UsageError(f"{what} does not declare its input shape: give --input-shape ({SHAPE_HELP})")
    shapes = _shapes_by_name(module, input_shapes, what)
    notes.append("input dtype float32 assumed (pass example_input= in Python for other dtypes)")
    return list(shapes), [torch.zeros(s) for s in shapes.values()]


def described(kind: str, source: str, sha: str, module, input_shapes, example_input, notes: list[str],
               what: str) -> UserModel:
    """Eval mode, float32, the example run once: inputs (dynamic batch) and outputs."""
    torch = require_torch()
    module.eval()
    state = list(module.parameters()) + list(module.buffers())
    if any(t.device.type != "cpu" for t in state):
        module.cpu()
        notes.append("moved to the CPU for the reference")
    if any(p.is_floating_point() and p.dtype != torch.float32 for p in state):
        module.float()
        notes.append("floating-point parameters converted to float32 for the FP32 reference")
    if example_input is not None:
        tensors = as_tensors(torch, example_input)
        names = input_names(module, len(tensors))
        if input_shapes:
            _check_example(module, names, tensors, input_shapes, what)
    else:
        names, tensors = _example_from_shapes(torch, module, input_shapes, what, notes)
    flat = run_example(module, names, tensors, what)
    inputs = tuple(TensorSpec(n, ("batch", *t.shape[1:]) if t.dim() else (), np_dtype(t.dtype))
                   for n, t in zip(names, tensors, strict=True))
    batch = int(tensors[0].shape[0]) if tensors[0].dim() else None
    notes.append("batch assumed dynamic (the first axis of every input)")
    return UserModel(kind, source, sha, inputs, output_specs(flat, batch, True), None, module, notes,
                     weights_hash=state_hash(module))


def _check_example(module, names: list[str], tensors: list, input_shapes, what: str) -> None:
    for n, shape in _shapes_by_name(module, input_shapes, what).items():
        if n not in names:
            raise UsageError(f"--input-shape names input '{n}', which example_input does not give "
                             f"({', '.join(names)})")
        t = tensors[names.index(n)]
        if t.dim() != len(shape) or tuple(t.shape[1:]) != tuple(shape[1:]):
            raise UsageError(f"input '{n}': --input-shape {fmt_shape(shape)} does not match example_input "
                             f"{fmt_shape(t.shape)}")


def flatten_outputs(out: Any, prefix: str = "") -> list[tuple[str, Any]]:
    """(name, tensor) pairs: one tensor "output"; a tuple or list "output_0", ...; a dict by key."""
    import torch

    if isinstance(out, torch.Tensor):
        return [(prefix or "output", out)]
    if isinstance(out, Mapping):
        items = [(f"{prefix}.{k}" if prefix else str(k), v) for k, v in out.items()]
    elif isinstance(out, tuple | list):
        fields = getattr(out, "_fields", None)
        keys = fields or [f"{prefix or 'output'}_{i}" for i in range(len(out))]
        items = [(f"{prefix}.{k}" if fields and prefix else k, v) for k, v in zip(keys, out, strict=True)]
    else:
        return []
    return [pair for k, v in items for pair in flatten_outputs(v, k)]


def run_example(module, names: list[str], tensors: list, what: str) -> list[tuple[str, Any]]:
    torch = require_torch()
    try:
        with torch.inference_mode():
            out = module(*tensors)
    except Exception as e:
        given = ", ".join(f"'{n}' {fmt_shape(t.shape)} {np_dtype(t.dtype)}" for n, t in zip(names, tensors,
                                                                                            strict=True))
        raise UsageError(f"{what} fails on input {given}: {type(e).__name__}: {first_line(e)}") from None
    flat = flatten_outputs(out)
    if not flat:
        raise UsageError(f"{what} returned {type(out).__name__}, no tensors")
    return flat


def output_specs(flat: list[tuple[str, Any]], batch: int | None, dynamic: bool) -> tuple[TensorSpec, ...]:
    def shape(t) -> tuple:
        s = tuple(int(d) for d in t.shape)
        return ("batch", *s[1:]) if dynamic and s and batch is not None and s[0] == batch else s

    return tuple(TensorSpec(n, shape(t), np_dtype(t.dtype)) for n, t in flat)


def state_hash(module) -> str:
    try:
        return state_dict_hash(module.state_dict())
    except Exception:  # a module whose state cannot be read as tensors has no content key
        return ""


def torch_runner(model: UserModel) -> Callable[[dict[str, np.ndarray]], dict[str, np.ndarray]]:
    """The module in inference mode on CPU float32 inputs; outputs by the model's output names."""
    torch = require_torch()
    names = [s.name for s in model.inputs]

    def run(feed: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        try:
            with torch.inference_mode():
                out = model.module(*[torch.from_numpy(np.ascontiguousarray(feed[n])) for n in names])
        except Exception as e:
            rows = len(next(iter(feed.values())))
            raise UsageError(f"{model.name} fails on a batch of {rows}: {type(e).__name__}: "
                             f"{first_line(e)}") from None
        res = {}
        for k, t in flatten_outputs(out):
            t = t.detach().cpu()
            res[k] = (t.float() if t.is_floating_point() and t.dtype != torch.float32 else t).numpy()
        return res

    return run
