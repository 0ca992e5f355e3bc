"""The untrusting channel (``fleet run --untrusted``): what a node returns is read as data, never unpickled.

Ray returns a task's value as an object whose metadata the node's worker writes: ``PYTHON`` (a pickle,
which ``ray.get`` loads, running whatever its ``__reduce__`` names), ``RAW`` (bytes, returned as they are),
or an error type (a pickled exception for a task that raised). So the node's task returns its answer as
JSON bytes (``as_data``), and the driver never calls ``ray.get`` on it: ``read_answer`` checks the object's
size with its owner (the driver) before fetching it, fetches its bytes and metadata without deserializing
(Ray's core worker, below ``ray.get``), takes ``RAW`` only, parses the bytes as JSON (bounded nesting:
base/schema.py) and checks the answer in full: its envelope here, the report with the results schema
(``Report.from_dict``). Anything else is ``Refused``, one line naming what was wrong: a failed row of that
node, nothing of it run or kept. An error object (the node died, the task was cancelled) names Ray's error
type only: its details are a pickle too. Ray's internals changing under this (another Ray than the pinned
one) refuses every answer rather than falling back to ``ray.get``."""

from __future__ import annotations

import json
from typing import Any

from typing_extensions import TypedDict

from infer_compare.base.errors import SchemaError
from infer_compare.base.records import Report
from infer_compare.base.schema import check_type

MAX_ANSWER_BYTES = 64 << 20  # a node's report with every latency sample of a long bundle stays far below
MAX_LINE = 400  # an error or absence line of a node, cut there
RAW = b"RAW"


class Refused(Exception):
    """A node's answer the driver does not take (one line)."""


class Lost(Refused):
    """Ray says the node's task failed (its node died, its worker crashed, it was cancelled)."""


class TaskFacts(TypedDict, total=False):
    CUDA_VISIBLE_DEVICES: str | None
    OMP_NUM_THREADS: str | None
    ray_gpu_ids: list[str] | None
    nice: int | None
    cores: int | None
    bundle: str


class NodeFacts(TypedDict, total=False):
    host: str
    tool_version: str
    python: str
    ray: str
    task: TaskFacts


class Answer(TypedDict, total=False):
    report: dict[str, Any]
    error: str
    absent: str
    node: NodeFacts


def as_data(answer: dict) -> bytes:
    """The node's answer (fleet/task.py) as JSON bytes: Ray stores bytes as they are (metadata RAW)."""
    return json.dumps(answer, allow_nan=True, separators=(",", ":")).encode("utf-8")


def read_answer(ray, ref, where: str, max_bytes: int = MAX_ANSWER_BYTES) -> tuple[dict, Any]:
    """The answer of the task ``ref`` (finished: ``ray.wait`` without fetching), read as data; ``Refused``
    otherwise, or ``Lost`` where Ray says the task failed (its error type). ``where``: 'node X' in
    messages. Returns what ``parse_answer`` does."""
    try:
        from ray.experimental import get_object_locations

        size = (get_object_locations([ref], timeout_ms=30_000).get(ref) or {}).get("object_size")
        if isinstance(size, int) and size > max_bytes + len(RAW):
            raise Refused(f"{where} returned {size} bytes, more than the {max_bytes >> 20} MiB the untrusted "
                          "channel takes; not fetched")
        (obj,) = ray._private.worker.global_worker.core_worker.get_objects([ref], 600_000)
        data, meta = obj[0], bytes(obj[1] or b"")
    except Refused:
        raise
    except (AttributeError, TypeError, ValueError, ImportError) as e:  # another Ray's internals: no ray.get
        raise Refused(f"{where}'s answer cannot be read as data with this Ray ({type(e).__name__}: {e}"[:300]
                      + "); refused rather than unpickled") from None
    if meta != RAW:
        raise _not_data(meta, where)
    blob = data.to_pybytes() if data is not None else b""
    if len(blob) > max_bytes:
        raise Refused(f"{where} returned {len(blob)} bytes, more than the {max_bytes >> 20} MiB the "
                      "untrusted channel takes")
    return parse_answer(blob, where)


def _not_data(meta: bytes, where: str) -> Refused:
    kind = meta.split(b",")[0]
    if kind.isdigit():
        try:
            from ray.core.generated.common_pb2 import ErrorType  # type: ignore[attr-defined]

            name = ErrorType.Name(int(kind))
        except Exception:  # noqa: BLE001 - an unknown number
            name = f"error type {int(kind)}"
        return Lost(f"{where}: Ray reports {name} (its details are a pickle: not read from an untrusted "
                    "node)")
    shown = kind[:20].decode("ascii", "replace")
    what = "a pickled Python object" if kind in (b"PYTHON", b"XLANG") else "not bytes"
    return Refused(f"{where} returned {what} (Ray metadata {shown!r}), not the JSON the untrusted channel "
                   "takes; not unpickled")


def parse_answer(blob: bytes, where: str) -> tuple[dict, Any]:
    """JSON bytes -> (the answer, its report as a Report or None), checked: exactly one of report / error /
    absent, the node's facts typed, the report against the results schema. ``Refused`` in one line."""
    from pydantic_core import from_json

    try:
        blob.decode("utf-8")
        answer = from_json(blob, allow_inf_nan=True)
    except (ValueError, UnicodeDecodeError) as e:
        raise Refused(f"{where} returned bytes that are not JSON: {' '.join(str(e).split())}"[:300]) from None
    try:
        check_type(Answer, answer, where=f"{where}'s answer")
        kinds = [k for k in ("report", "error", "absent") if k in answer]
        if len(kinds) != 1:
            raise SchemaError(f"{where}'s answer: exactly one of report, error, absent expected, got "
                              f"{', '.join(kinds) or 'none'}")
        report = Report.from_dict(answer["report"], where=f"{where}'s report") if "report" in answer else None
    except SchemaError as e:
        raise Refused(str(e)[:MAX_LINE * 2]) from None
    for k in ("error", "absent"):
        if k in answer:
            answer[k] = " ".join(answer[k].split())[:MAX_LINE]
    return answer, report
