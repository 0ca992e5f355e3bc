"""The exporter interface.

``probe() -> Availability`` (class method, cheap, never raises) and
``export(ctx, source, out_dir, precision) -> ExportResult``. External compilers run
with an argument list and ``check=True``; their stderr goes into the ExportError.
Nothing installs anything at run time: a missing piece yields the pip extra.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from infer_compare.base.errors import BackendUnavailable, ExportError
from infer_compare.base.records import Availability
from infer_compare.base.serial import decode, encode
from infer_compare.catalog.options import NoOptions, Options
from infer_compare.catalog.runtimes import options_class


@dataclass
class ExportContext:
    """Everything an exporter may need; heavy members are None where unavailable."""

    model: Any  # torch.nn.Module in eval mode (None when exporting from a bundle)
    model_name: str
    input_shape: tuple[int, ...]  # C, H, W
    num_classes: int
    calibration: Any  # np.ndarray N,C,H,W float32, real preprocessed images
    max_batch: int = 64
    opt_batch: int = 1
    # device kind -> the batch sizes that will be measured there (e.g. TensorRT: one profile per batch)
    batch_sizes: dict[str, tuple[int, ...]] = field(default_factory=dict)
    preprocessing: dict[str, Any] = field(default_factory=dict)
    # rebuilds the module from the root artifact (models.rebuild)
    model_spec: dict[str, Any] = field(default_factory=dict)
    # the declared options of the runner named by the format's ``options_from`` (builder options)
    options: Options = field(default_factory=NoOptions)
    requested: dict[str, Any] = field(default_factory=dict)  # what the user asked for explicitly
    threads: int | None = None
    # the artifact cache root: exporters keep tool caches (TensorRT timing cache) below it
    cache_root: str = ""
    log: Callable[[str], None] = lambda msg: None
    option_sets: dict[str, Options] = field(default_factory=dict)  # runner name -> the user's options
    # a model with several inputs or outputs: their names, in the model's order (``calibration`` is then
    # {input name: N x ...}); () for a model with one of each, whose ONNX names stay "input" and "logits"
    input_names: tuple[str, ...] = ()
    output_names: tuple[str, ...] = ()
    # inputs not batched on axis 0 (layout.Layout.to_dict()); {} when every one is: calibration rows are laid
    # into the model's axes with layout.Layout.to_model before they are fed
    layout: dict[str, Any] = field(default_factory=dict)

    def options_as(self, cls: type) -> Any:
        """The options as ``cls`` (the exporter's declared class): the given ones, else its defaults."""
        return self.options if isinstance(self.options, cls) else cls()

    def for_format(self, fmt: Any) -> ExportContext:
        """This context with ``options`` set to those of the runner the format's exporter reads
        (``Format.options_from``): the user's, else that runner's declared defaults."""
        name = getattr(fmt, "options_from", None)
        if not name:
            return self

        return dataclasses.replace(self, options=self.option_sets.get(name) or options_class(name)())

    def sent(self) -> dict[str, Any]:
        """The plain part of the context, as JSON, for the export child (artifacts/chain.py); the rest (the
        module, the calibration arrays, the options, the log) travels its own way or is made again there."""
        return {f.name: encode(getattr(self, f.name)) for f in dataclasses.fields(self)
                if f.name not in _NOT_SENT}

    @classmethod
    def received(cls, plain: dict[str, Any], **rest: Any) -> ExportContext:
        """The context again from :meth:`sent`'s dict (types restored from the annotations) and ``rest``."""
        hints = typing.get_type_hints(cls)
        blank = {"model_name": "", "input_shape": (), "num_classes": 0}  # a spec that names no model
        return cls(**{**blank, **{k: decode(hints[k], v) for k, v in plain.items()}}, **rest)


# made again in the export child or sent apart: the module (rebuilt from ExportSpec.model_spec), the
# calibration arrays (a .npy/.npz file), the options (with their class), the log (the child's stdout)
_NOT_SENT = ("model", "calibration", "options", "log", "option_sets", "model_spec")


@dataclass
class ExportResult:
    path: str  # main artifact file, inside out_dir
    options: dict[str, Any] = field(default_factory=dict)  # what was applied (recorded in the manifest)
    notes: list[str] = field(default_factory=list)


class Exporter:
    format = "base"

    @classmethod
    def probe(cls) -> Availability:
        raise NotImplementedError

    @classmethod
    def cache_extras(cls, ctx: ExportContext, precision: str) -> dict[str, Any]:
        """What besides model, weights, shape and precision changes the artifact
        (library versions, options, for TensorRT the GPU)."""
        return {}

    @classmethod
    def declines(cls, ctx: ExportContext, precision: str) -> BackendUnavailable | None:
        """Why this exporter will not build ``precision`` here, decided in the parent before any
        export process starts (e.g. an opt-in conversion that was not asked for); None to build.
        Cheap: it sees the context (the model in the parent), never the files."""
        return None

    def export(self, ctx: ExportContext, source: str | None, out_dir: Path, precision: str) -> ExportResult:
        raise NotImplementedError

    @classmethod
    def explain_unavailable(cls, ctx: ExportContext, source: str | None, precision: str) -> str:
        """What can still be said about the artifact when this exporter cannot run here
        (e.g. the Edge TPU pre-check of the int8 TFLite file without edgetpu_compiler);
        appended to the skipped row's reason. Cheap, never raises; "" for nothing."""
        return ""


def run_tool(args: list[str], what: str, timeout: float | None = None, cwd: str | None = None,
             env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """Run an external converter/compiler; failure raises ExportError carrying its stderr."""
    try:
        return subprocess.run(
            args, check=True, capture_output=True, text=True, timeout=timeout, cwd=cwd,
            env={**os.environ, **(env or {})},
        )
    except FileNotFoundError as e:
        raise ExportError(f"{what}: '{args[0]}' not found on PATH") from e
    except subprocess.TimeoutExpired as e:
        raise ExportError(f"{what}: '{args[0]}' timed out after {timeout:.0f} s") from e
    except subprocess.CalledProcessError as e:
        tail = "\n".join((e.stderr or e.stdout or "").strip().splitlines()[-15:])
        raise ExportError(f"{what}: '{' '.join(args[:2])}...' exited with {e.returncode}: {tail}") from e


def file_size(path: str) -> int:
    """Size of an artifact including its sidecar files (.onnx.data, .bin)."""
    p = Path(path)
    total = p.stat().st_size
    for side in (p.with_suffix(".bin"), Path(str(p) + ".data")):
        if side.exists() and side != p:
            total += side.stat().st_size
    return total
