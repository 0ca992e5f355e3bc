"""What a bundle says about its PyTorch model, as data only (bundle/export.py): the model spec the device
rebuilds from (manifest_schema.ModelSpec: no module, factory, path or loader), and, for a user's model
whose PyTorch form is code (a factory's module, a TorchScript file), its root artifact made into data: an
ExportedProgram of the module (torch.export), or, where that cannot be made, no PyTorch artifact at all
(the rows that need it are not built, and the export says why)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from infer_compare.base.records import SKIPPED
from infer_compare.prepare.prepared import Prepared

Key = tuple[str, str]
CODE_KINDS = ("factory", "torchscript")  # a user's model whose PyTorch form is code, not data
BUILT_IN_KEYS = ("name", "family", "input_shape", "num_classes")


def bundle_spec(prep: Prepared) -> dict[str, Any]:
    """The model spec a bundle carries: a built-in model's name and sizes; a user's model's name and the
    kind its root travels as (an ExportedProgram for a factory, a Python module or a TorchScript file)."""
    s = prep.model_spec
    if s.get("family") != "user":
        return {k: s[k] for k in BUILT_IN_KEYS if k in s}
    kind = s.get("kind")
    return {"name": str(s.get("name", "")), "family": "user",
            "kind": kind if kind in ("onnx", "tflite", "exported_program") else "exported_program"}


def _example(prep: Prepared, rows: int) -> tuple[Any, ...]:
    import numpy as np
    import torch

    ev = prep.ds.eval
    names = [i["name"] for i in prep.minfo.inputs] if isinstance(ev, dict) else [None]
    arrays = [ev[n] for n in names] if isinstance(ev, dict) else [ev]
    return tuple(torch.from_numpy(np.ascontiguousarray(a[:rows])) for a in arrays)


def _export_program(prep: Prepared, out: Path) -> str:
    """The module as an ExportedProgram at ``out``, its batch dynamic where torch.export allows; its batch."""
    import torch

    example = _example(prep, 2)
    dim = torch.export.Dim("batch", min=1, max=1024)
    try:
        dynamic = tuple({0: dim} for _ in example)
        ep, batch = torch.export.export(prep.model, example, dynamic_shapes=dynamic), "dynamic"
    except Exception:  # e.g. a batch-dependent reshape: batch 1 only, as a Python module's (prepare/user.py)
        ep, batch = torch.export.export(prep.model, _example(prep, 1)), "1"
    torch.export.save(ep, str(out))
    return batch


def _drop_pytorch(plan: Any, why: str, warn) -> None:
    """No PyTorch artifact in the bundle: its rows, and those built from it on the device, say why."""
    hint = "measure the PyTorch rows with 'infer-compare compare' where the model's code is"
    for key in [k for k in plan.ship if k[0] == "pytorch"]:
        plan.ship.remove(key)
        if key in plan.wanted:
            plan.not_built.append({"format": key[0], "precision": key[1], "status": SKIPPED, "reason": why,
                                   "hint": hint})
            warn(f"{key[0]} {key[1]} is not in the bundle: {why}")
    for d in [d for d in plan.deferred if d["source"][0] == "pytorch"]:
        plan.deferred.remove(d)
        plan.not_built.append({"format": d["format"], "precision": d["precision"], "status": SKIPPED,
                               "reason": f"its source is the PyTorch model: {why}", "hint": hint})
        warn(f"{d['format']} {d['precision']} is not in the bundle: its source is the PyTorch model: {why}")


def torch_root_as_data(prep: Prepared, plan: Any, work: Path, warn) -> dict[Key, tuple[Path, str]]:
    """{pytorch key: (file, note)} to carry instead of the root artifact, for a model whose PyTorch form is
    code; or the PyTorch artifact taken out of ``plan`` with the reason. Empty for any other model."""
    kind = prep.model_spec.get("kind") if prep.model_spec.get("family") == "user" else None
    shipped = [k for k in plan.ship if k[0] == "pytorch"]
    if kind not in CODE_KINDS or not shipped:
        return {}
    if kind == "torchscript" or prep.model is None:
        _drop_pytorch(plan, "the model is a TorchScript file, which is code: a bundle carries data only",
                      warn)
        return {}
    out = work / "model.pt2"
    try:
        batch = _export_program(prep, out)
    except Exception as e:  # noqa: BLE001 - any failure of torch.export: the artifact stays out, said why
        first = (str(e).strip().splitlines() or [type(e).__name__])[0][:160]
        _drop_pytorch(plan, f"the model is a factory's module (code: a bundle carries data only) and "
                            f"torch.export could not make it an ExportedProgram ({first})", warn)
        return {}
    note = (f"the factory's module as an ExportedProgram (torch.export, batch {batch}): a bundle carries "
            "data, not the factory's code")
    return {k: (out, note) for k in shipped}
