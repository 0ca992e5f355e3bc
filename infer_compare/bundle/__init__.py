"""Export here, run there: bundles for devices without torch or converters.

Enters: a model (export, on the workstation) or a bundle directory (run, on the device). Leaves: a
bundle directory, or a Report. May import: measure and every layer below it.

``export_bundle()`` (workstation, needs torch) writes a directory::

    manifest.json                 model, weights hash, input spec and preprocessing,
                                  every file's sha256 and size, tool and library versions
    data/eval.npz                 the reference inputs (preprocessed, N,C,H,W float32), compressed
    data/reference.npz            the PyTorch FP32 outputs on them, compressed
    data/reference_b{B}.npz       a stream model's reference computed in groups of B rows, B = 1, 2, 4, ...
                                  up to max_batch (manifest "stream"; prepare/user_model.py)
    data/labels.npz               labels, where the model has them (LeNet digits)
    data/calibration.npz          calibration inputs, only when an int8 artifact is quantized on the device
                                  (an int8 built from a source that is not int8)
                                  (bundles written before issue 38 hold .npy files; they still run)
    artifacts/<format>-<prec>/    each artifact with its sidecar files

Formats that cannot be built on the workstation but can on the device travel as their
source with a note in the manifest ("deferred"): TensorRT engines always (an engine
is tied to its GPU and TensorRT version), and any format whose exporter is missing
here when its source was built. The Edge TPU model is compiled at export time where
``edgetpu_compiler`` is present (x86-64 Linux); where it is not, its deferred entry
names a ``drop_in`` file and says in one line how to make it (the compiler, on an
x86-64 Linux host): ``run`` picks up that file when it has been placed (it is outside
the manifest's hashes, and the rows say so).

``run_bundle()`` (device, no torch, no converter) verifies the manifest and every
hash before loading anything, builds the deferred formats whose exporter is present
there (the same exporter classes, with ``ExportContext.model = None``), measures every
backend present, checks parity against the stored reference outputs, and returns the
usual Report.

A bundle is untrusted input: a path that escapes the bundle (absolute, "..", a
symbolic link), a missing or extra file (anywhere in its folder), a hash mismatch, an
unknown format or precision, or arrays of the wrong shape are refused with a BundleError
(a UsageError: exit status 2, one line). Arrays are read with ``allow_pickle=False``,
within the memory available (base/npyfile.py, base/memory.py).

A bundle carries data, never code: what ``run``, ``gate`` and ``fleet run`` execute comes
from the installed tool. Its model spec names a built-in architecture or the kind of file a
user's model travels as (ONNX, TFLite, ExportedProgram), never a module, a factory, a path
or a loader (manifest_schema.py); its PyTorch files are weights-only (torchfile.py, checked
without unpickling) and are loaded on the device by a data-only path
(``models.rebuild_received``). A user's factory model is exported as an ExportedProgram of
its module (export_torch.py).
"""

from infer_compare.bundle.common import (
    BUNDLE_KIND,
    BUNDLE_VERSION,
    DEFAULT_MAX_BATCH,
    MANIFEST,
    BundleError,
    sha256_file,
)
from infer_compare.bundle.export import export_bundle
from infer_compare.bundle.run import load_inputs, prepared_from_bundle, run_bundle
from infer_compare.bundle.verify import Verified, verify

__all__ = ["BUNDLE_KIND", "BUNDLE_VERSION", "DEFAULT_MAX_BATCH", "MANIFEST", "BundleError", "Verified",
           "export_bundle", "load_inputs", "prepared_from_bundle", "run_bundle", "sha256_file", "verify"]
