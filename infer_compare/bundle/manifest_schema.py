"""The shape of a bundle's manifest.json (bundle/export.py writes it), checked in full by
bundle/verify.py with base/schema.check_type before any of it is used: every section the device side
reads, with its type; unknown keys pass (newer exporters add some), except in ``model_spec``. Formats,
precisions and paths are checked against the catalog and the bundle's folder afterwards (verify.py).

A bundle carries data, never code: ``model_spec`` only names what the installed tool already knows (a
built-in architecture, or a user's model that travels as an ONNX, TFLite or ExportedProgram file), and
its keys are closed (``MODEL_SPEC_KEYS``): a module, a factory, a path or a loader has no place in it."""

from __future__ import annotations

from typing import Any, Literal

# pydantic reads typing.TypedDict only from Python 3.12 on; typing_extensions comes with pydantic
from typing_extensions import Required, TypedDict


class FileEntry(TypedDict):
    sha256: str
    size: int


class Export(TypedDict, total=False):
    options: dict[str, Any] | None
    notes: list[str] | None
    build_s: float | None
    cache_key: str
    built_from: str


class Artifact(TypedDict, total=False):
    format: Required[str]
    precision: Required[str]
    path: Required[str]
    dir: str
    source: list[str] | None
    export: Export | None
    selected: bool


class Deferred(TypedDict, total=False):
    format: Required[str]
    precision: Required[str]
    source: list[str] | None
    note: str
    drop_in: str | None


class NotBuilt(TypedDict, total=False):
    format: str | None
    precision: str | None
    status: str | None
    reason: str | None
    hint: str | None


class ArrayInfo(TypedDict, total=False):
    shape: list[int]
    dtype: str


class DataEntry(TypedDict, total=False):
    path: Required[str]
    shape: list[int]
    dtype: str
    arrays: dict[str, ArrayInfo] | None


class Data(TypedDict, total=False):
    description: str
    eval: Required[DataEntry]
    reference: Required[DataEntry]
    calibration: DataEntry
    labels: DataEntry


class Input(TypedDict, total=False):
    shape: Required[list[int]]
    dtype: str
    layout: str
    preprocessing: dict[str, Any] | None


class Selection(TypedDict, total=False):
    formats: list[str] | None
    precisions: list[str] | None
    exported: list[list[str]]
    max_batch: int
    seed: int


class ExportEnvironment(TypedDict, total=False):
    cpu_model: str
    python: str
    libraries: dict[str, str]
    gpus: list[dict[str, Any]]


class ModelSpec(TypedDict, total=False):
    """What the device side rebuilds the PyTorch model from, with its root artifact's file (models/__init__.py
    ``rebuild_received``): a built-in family's architecture by name, or a user's model by its kind."""

    name: Required[str]
    family: Literal["lenet", "torchvision", "user"]  # needed where a pytorch artifact travels (verify.py)
    kind: Literal["onnx", "tflite", "exported_program"]  # a user's model: how its root travels (data only)
    input_shape: list[int]
    num_classes: int


MODEL_SPEC_KEYS = frozenset(ModelSpec.__annotations__)
USER_KINDS = ("onnx", "tflite", "exported_program")


class Manifest(TypedDict, total=False):
    kind: Required[str]
    bundle_version: Required[int]
    created: str
    tool_version: str
    command: list[str]
    model: Required[dict[str, Any]]  # a ModelInfo record: checked as one (base/schema.validate)
    model_spec: Required[ModelSpec]
    input: Required[Input]
    selection: Selection | None
    data: Required[Data]
    artifacts: list[Artifact]
    deferred: list[Deferred]
    not_built: list[NotBuilt]
    notes: list[str]
    warnings: list[str]
    export_environment: ExportEnvironment | None
    output_kinds: dict[str, Any]
    files: Required[dict[str, FileEntry]]
