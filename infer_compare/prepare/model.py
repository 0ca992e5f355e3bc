"""Any model to its Prepared: a built-in or torchvision name (prepared.py) or the user's own (user.py),
checked before any work; the ``--output-kind`` choices checked and kept; ``compare(data=...)`` forms."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from infer_compare import models
from infer_compare.base.errors import UsageError
from infer_compare.base.progress import Progress
from infer_compare.parity.det_groups import find_groups, unmatched_named
from infer_compare.parity.detections import FORMATS, parse_head, recognize
from infer_compare.parity.kinds import (
    DETECTIONS,
    KINDS,
    REGRESSION,
    SCORES,
    check_output_kinds,
    infer_kind,
    output_shapes,
    parse_output_kinds,
)
from infer_compare.prepare.inputs import DataOptions
from infer_compare.prepare.prepared import prepare_model
from infer_compare.prepare.user import prepare_user_model

# a [N, steps, classes] output that is not a softmax is judged on its values: a recognizer's logits are one
LOGITS_HINT = "; a recognizer's per-step logits are judged on the text they read with --output-kind NAME=ctc"


def check_model(model: Any, parity_samples: int | None) -> None:
    """A built-in name must be known, before any work (the user's own model is checked when loaded)."""
    if parity_samples is not None and parity_samples < 1:
        raise UsageError(f"--parity-samples must be >= 1, got {parity_samples}")
    if not models.looks_like_user_model(model):
        models.resolve(model)


def prepare_any(model: Any, *, weights: str, input_shape: str | None, example_input: Any, data: Any,
                parity_samples: int | None, calibration_samples: int | None, seed: int, cache: Any,
                threads: int, prog: Progress, warn: Callable[[str], None]):
    """The Prepared of a built-in model (prepare/prepared.py) or of the user's own (prepare/user.py)."""
    if models.looks_like_user_model(model):
        return prepare_user_model(model, weights=None if weights in ("auto", "random") else weights,
                                  input_shape=input_shape, example_input=example_input, data=data,
                                  parity_samples=parity_samples, calibration_samples=calibration_samples,
                                  seed=seed, cache=cache, prog=prog, warn=warn)

    return prepare_model(model, weights=weights, parity_samples=parity_samples, data=data,
                         calibration_samples=calibration_samples, seed=seed, cache=cache, threads=threads,
                         prog=prog, warn=warn)
def kind_options(kinds: dict[str, str] | Iterable[str] | None) -> dict[str, str]:
    """``compare(output_kinds=...)`` as {name: kind}, each kind checked (UsageError) before any work."""
    if isinstance(kinds, dict):
        kinds = [f"{k}={v}" for k, v in kinds.items()]
    return parse_output_kinds(kinds)


def judge_outputs_as(prep: Any, kinds: dict[str, str]) -> None:
    """The user's kinds checked against the model's outputs (UsageError) and kept on ``prep``, with a note;
    a detection head (given or recognized) is resolved once, with the model's input size, and kept too."""
    if kinds:
        check_output_kinds(kinds, output_shapes(prep))
        prep.notes.append("outputs judged as given by --output-kind: "
                          + ", ".join(f"{k} as {v}" for k, v in kinds.items()))
    # the loader's (models/torchvision_det.py), then the user's
    kinds = {**(prep.output_kinds or {}), **kinds}
    prep.output_kinds = dict(kinds)
    refs = prep.ref if isinstance(prep.ref, dict) else {"": prep.ref}
    grouped = _detection_groups(prep, refs, kinds)
    for k, a in refs.items():
        if k in grouped:
            continue
        kind = kinds.get(k) or (next(iter(kinds.values())) if kinds and not k else "") or infer_kind(a)
        if kind.split(":")[0] == DETECTIONS:
            kind = _detections(prep, k, kind, a)
        if kind != SCORES:
            what = _head_text(kind) or KINDS[kind]
            prep.notes.append(f"output {k + ' ' if k else ''}{list(np.shape(a)[1:])} judged as "
                              f"{kind.split(':')[0]} ({what}; parity/kinds.py; --output-kind NAME=KIND "
                              "to say otherwise)"
                              + (LOGITS_HINT if kind == REGRESSION and np.ndim(a) == 3 else ""))



def _detection_groups(prep: Any, refs: dict[str, Any], kinds: dict[str, str]) -> set[str]:
    """The detection heads spread over several outputs (parity/det_groups.py), each said once in the notes;
    an output named with such a format whose partners are not found is a UsageError. The outputs taken."""
    groups = find_groups(refs, kinds) if len(refs) > 1 else []
    lost = unmatched_named(refs, kinds, groups)
    if lost:
        raise UsageError(f"--output-kind {lost[0]}={kinds[lost[0]]}: no partner outputs found (ssd: boxes "
                         f"[N, A, 4] as corners and scores [N, A, classes] in 0-1; post-nms: boxes "
                         f"[N, K, 4], scores [N, K] in 0-1 and whole-number classes [N, K]); its outputs: "
                         + ", ".join(f"{k} {list(np.shape(v))}" for k, v in refs.items()))
    for g in groups:
        prep.notes.append(f"outputs {' + '.join(g.names)} judged together as detections ({g.head.text()}; "
                          f"parity/det_groups.py; --output-kind NAME=KIND to say otherwise)")
    return {k for g in groups for k in g.names}


def _detections(prep: Any, name: str, kind: str, ref: Any) -> str:
    """``detections:FORMAT`` with the grid's size filled in from the input (UsageError when it cannot be)."""
    shape = tuple(getattr(prep.minfo, "input_shape", ()) or ())
    hw = tuple(int(d) for d in shape[-2:]) if len(shape) >= 2 else None
    try:
        head = parse_head(kind.partition(":")[2], hw) if ":" in kind else recognize(ref, hw)
    except ValueError as e:
        raise UsageError(f"--output-kind {name or 'output'}={kind}: {e}") from None
    if head is None:
        raise UsageError(f"--output-kind {name or 'output'}={kind}: its values do not look like a YOLO head "
                         f"(give the format: detections:{'|'.join(FORMATS)})")
    full = f"{DETECTIONS}:{head.spec}"
    prep.output_kinds = {**(prep.output_kinds or {}), (name or _only_output(prep)): full}
    return full


def _only_output(prep: Any) -> str:
    names = list(output_shapes(prep))
    return names[0] if names else "output"


def _head_text(kind: str) -> str:
    return parse_head(kind.partition(":")[2], (1, 1)).text() if kind.startswith(DETECTIONS + ":") else ""


def data_options(data: Any):
    """``compare(data=...)`` as a DataOptions: None, a DataOptions, a path (str or os.PathLike) or a dict
    of DataOptions' fields; anything else is a TypeError that names those forms."""
    from dataclasses import fields

    if data is None or isinstance(data, DataOptions):
        return data
    if isinstance(data, str | os.PathLike):
        return DataOptions(data=os.fspath(data))
    names = [f.name for f in fields(DataOptions)]
    if isinstance(data, dict):
        unknown = sorted(set(data) - set(names))
        if unknown:
            raise TypeError(f"compare(data={{...}}): unknown field(s) {', '.join(map(str, unknown))}; "
                            f"DataOptions has {', '.join(names)}")
        return DataOptions(**data)
    raise TypeError(f"compare(data=...) takes a path (str or os.PathLike: an image folder, .npy or .npz) or "
                    f"infer_compare.DataOptions({', '.join(names)}), not {type(data).__name__}")
