"""The shape of the free-form parts of a results file that the renderers and the regression gate read:
the known keys of ``RunRecord.extra``, ``RunRecord.options``, ``Environment.gpus``... (each optional;
other keys pass unchecked), and the allowed values of the enum-like strings. ``Report.from_dict``
checks a file against these with base/schema.validate before anything reads it.
"""

from __future__ import annotations

from typing import Any, Literal

# pydantic reads typing.TypedDict only from Python 3.12 on; typing_extensions comes with pydantic
from typing_extensions import TypedDict

Number = float | None  # a measured figure (an integer passes); null where NaN was written
Text = str | None


class Calibration(TypedDict, total=False):
    ms: Number
    workload: Any
    other_cores: Number
    steal_cores: Number


class Loop(TypedDict, total=False):
    warmup_ns: Number


class Divergence(TypedDict, total=False):
    node: Text
    text: Text


class Extra(TypedDict, total=False):
    calibration: Calibration | None
    loop: Loop | None
    first_divergence: Divergence | None
    energy_source: Text
    energy_j_per_image: Any  # read only when a finite number
    energy_mj_per_image: Any
    machine: Text


class RowOptions(TypedDict, total=False):
    concurrency: int | None
    io: Text


class Gpu(TypedDict, total=False):
    name: Text
    memory_mib: Number
    driver: Text


class Jetson(TypedDict, total=False):
    model: Text
    l4t: Text
    jetpack: Text
    power_mode: Any
    clocks_locked: Any


class DeviceFacts(TypedDict, total=False):
    jetson: Jetson | None
    raspberry_pi: Any
    edgetpu: list[str] | None
    governor: Text


class Tensor(TypedDict, total=False):
    name: Text
    shape: list[int | str | None] | None
    dtype: Text
    batch_axis: int | None
    source: Text


class Span(TypedDict, total=False):
    what: Text
    kind: Text
    start_s: Number
    wall_s: Number


def report_fields(statuses: tuple[str, ...], scenarios: tuple[str, ...]) -> dict[str, Any]:
    """base/schema.validate's ``fields`` for a Report."""
    return {
        "RunRecord.status": Literal[statuses],
        "RunRecord.scenario": Literal[scenarios],
        "RunRecord.skip_kind": Literal["", "no_device", "unsupported", "unavailable"],
        "Settings.scenarios": list[Literal[scenarios]],
        "Settings.io": Literal["device", "host"],
        "RunRecord.extra": Extra,
        "RunRecord.options": RowOptions,
        "Environment.gpus": list[Gpu],
        "Environment.device_facts": DeviceFacts,
        "ModelInfo.inputs": list[Tensor],
        "ModelInfo.outputs": list[Tensor],
        "Report.timeline": list[Span],
        "ParityResult.*": None,  # NaN outputs give NaN figures, written as null
    }
