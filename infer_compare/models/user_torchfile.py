"""The user's PyTorch model file: TorchScript (``torch.jit.save``) or an ExportedProgram
(``torch.export.save``, ``.pt2``); see ``user.py`` for the public API.

Files are recognised by their zip members, never by unpickling them: TorchScript archives
hold ``code/`` and ``constants.pkl``, ExportedPrograms ``archive_format`` (or the
``serialized_exported_program`` of older torch). Anything else goes through
``torch.load(weights_only=True)``: a state dict is explained, an object that needs full
unpickling (a pickled whole model) is refused without running any of it.
``torch.export.load`` itself falls back to full unpickling in places, so it runs with
``torch.load`` forced to ``weights_only=True`` and ``pickle.loads`` refused.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import pickle
import warnings
import zipfile
from collections.abc import Iterator
from typing import Any

from infer_compare.base.errors import UsageError
from infer_compare.models.user import UserModel, first_line, resolve_inputs, sha256_files, static_batch_of
from infer_compare.models.user_torch import (
    SAVE_HINT,
    as_state_dict,
    as_tensors,
    described,
    np_dtype,
    output_specs,
    refusal,
    require_torch,
    run_example,
    state_hash,
    weights_only_load,
)


def sniff(path: str) -> str:
    """"torchscript", "exported_program" or "other", from the zip members alone."""
    if not zipfile.is_zipfile(path):
        return "other"
    with zipfile.ZipFile(path) as z:
        names = z.namelist()
    if any(n.endswith("/archive_format") or "serialized_exported_program" in n for n in names):
        return "exported_program"
    if any(n.endswith("constants.pkl") for n in names) and any("/code/" in n for n in names):
        return "torchscript"
    return "other"


def _not_a_model(path: str) -> UsageError:
    obj = weights_only_load(path)
    sd = as_state_dict(obj)
    if sd is not None:
        return UsageError(f"{path} holds a state dict ({len(sd)} tensors), not a model: a state dict needs "
                          "its architecture: --model package.module:factory --weights FILE")
    return UsageError(f"{path} holds a {type(obj).__name__}, neither a TorchScript model, an ExportedProgram "
                      f"nor a state dict; {SAVE_HINT}")


@contextlib.contextmanager
def _no_full_unpickling(torch, path: str) -> Iterator[None]:
    """``torch.load`` forced to ``weights_only=True`` and ``pickle.loads`` refused, for a while."""
    orig_load, orig_loads = torch.load, pickle.loads

    def load(*a, **k):
        k["weights_only"] = True
        return orig_load(*a, **k)

    def loads(*a, **k):
        raise UsageError(f"refusing to unpickle {path}: it holds pickled Python objects, and loading them "
                         f"could run arbitrary code; {SAVE_HINT}")

    old_env = os.environ.get("TORCH_FORCE_WEIGHTS_ONLY_LOAD")
    torch.load, pickle.loads = load, loads
    os.environ["TORCH_FORCE_WEIGHTS_ONLY_LOAD"] = "1"
    try:
        yield
    finally:
        torch.load, pickle.loads = orig_load, orig_loads
        if old_env is None:
            os.environ.pop("TORCH_FORCE_WEIGHTS_ONLY_LOAD", None)
        else:
            os.environ["TORCH_FORCE_WEIGHTS_ONLY_LOAD"] = old_env


def _load_exported(path: str):
    torch = require_torch()
    if importlib.util.find_spec("torch.export") is None:
        raise UsageError(f"{path} is an ExportedProgram: loading it needs torch.export (torch >= 2.1; this "
                         f"is torch {torch.__version__})")
    import torch.export

    if not hasattr(torch.export, "load"):
        raise UsageError(f"{path} is an ExportedProgram: this torch {torch.__version__} has no "
                         "torch.export.load")
    try:
        with _no_full_unpickling(torch, path):
            return torch.export.load(path)
    except UsageError:
        raise
    except pickle.UnpicklingError as e:
        raise refusal(path, e) from None
    except Exception as e:
        raise UsageError(f"cannot load ExportedProgram {path}: {type(e).__name__}: {first_line(e)}") from None


def _exported_inputs(ep, what: str) -> list[tuple[str, tuple[Any, ...], str]]:
    """(name, shape with int / symbol per axis, dtype) of each user input, from placeholder metadata."""
    user = list(ep.graph_signature.user_inputs)
    vals = {n.name: n.meta.get("val") for n in ep.graph.nodes if n.op == "placeholder"}
    out = []
    for name in user:
        v = vals.get(name)
        if not hasattr(v, "shape") or not hasattr(v, "dtype"):
            raise UsageError(f"{what}: input '{name}' is not a tensor ({type(v).__name__}); only tensor "
                             "inputs are supported")
        out.append((name, tuple(d if isinstance(d, int) else str(d) for d in v.shape), np_dtype(v.dtype)))
    if not out:
        raise UsageError(f"{what} has no tensor inputs")
    return out


def _from_exported(path: str, input_shapes, example_input) -> UserModel:
    torch = require_torch()
    ep = _load_exported(path)
    what = f"ExportedProgram {os.path.basename(path)}"
    if not hasattr(ep, "module"):
        raise UsageError(f"{what}: this torch {torch.__version__} cannot run an ExportedProgram "
                         "(no .module()); use torch >= 2.2 or save the model with torch.jit.save")
    module = ep.module()
    with contextlib.suppress(NotImplementedError, AttributeError):
        module.eval()  # an exported graph keeps the mode it was exported in; newer torch refuses eval()
    inputs = resolve_inputs(_exported_inputs(ep, what), input_shapes, what)
    static = static_batch_of(inputs)
    notes = ["ExportedProgram (torch.export); input shapes and dtypes from its graph signature"]
    if example_input is not None:
        tensors = as_tensors(torch, example_input)
    else:
        ex = getattr(ep, "example_inputs", None)
        first = ex[0][0] if ex and ex[0] and hasattr(ex[0][0], "shape") and ex[0][0].dim() else None
        batch = static or (int(first.shape[0]) if first is not None else 2)
        tensors = [torch.zeros(tuple(batch if d == "batch" else d for d in s.shape),
                               dtype=getattr(torch, s.dtype)) for s in inputs]
    flat = run_example(module, [s.name for s in inputs], tensors, what)
    outputs = output_specs(flat, int(tensors[0].shape[0]) if tensors[0].dim() else None, static is None)
    return UserModel("exported_program", path, sha256_files([path]), inputs, outputs, static, module, notes,
                     weights_hash=state_hash(module))


def from_file(path: str, input_shapes, example_input) -> UserModel:
    """A ``.pt``/``.pth``/``.pt2``/``.ts``/``.torchscript`` file: TorchScript or ExportedProgram."""
    kind = sniff(path)
    if kind == "exported_program":
        return _from_exported(path, input_shapes, example_input)
    if kind != "torchscript":
        raise _not_a_model(path)
    torch = require_torch()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)  # "torch.jit.load is deprecated" (torch >= 2.10)
            module = torch.jit.load(path, map_location="cpu")
    except Exception as e:
        raise UsageError(f"cannot load TorchScript {path}: {type(e).__name__}: {first_line(e)}") from None
    notes = ["TorchScript (torch.jit)"]
    return described("torchscript", path, sha256_files([path]), module, input_shapes, example_input, notes,
                      f"TorchScript model {os.path.basename(path)}")


def load_exported_module(path: str):
    """The runnable module of an ExportedProgram file (loaded without full unpickling)."""
    return _load_exported(path).module()
