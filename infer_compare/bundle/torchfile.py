"""A bundle's PyTorch file checked without torch and without unpickling anything: a zip archive (what
``torch.save`` and ``torch.export.save`` write) whose every pickle names only the globals a weights-only
state dict needs (tensors, their storages, dtypes, an OrderedDict). A pickle that names anything else (a
class of the sender's, ``os.system``, ``builtins.exec``...) would run code when unpickled without
``weights_only``: refused, before anything is loaded, on a device with or without torch. The real load on
the device is weights-only as well (models/__init__.py ``rebuild_received``): this is the first of two
locks, and the one that answers in one line before any work.
"""

from __future__ import annotations

import io
import pickletools
import zipfile
from pathlib import Path
from typing import IO

from infer_compare.bundle.common import BundleError

# what torch's weights-only unpickler needs for tensors and state dicts (torch/_weights_only_unpickler.py)
_ALLOWED = {
    "collections": {"OrderedDict"},
    "torch._utils": {"_rebuild_tensor", "_rebuild_tensor_v2", "_rebuild_tensor_v3", "_rebuild_parameter",
                     "_rebuild_parameter_with_state", "_rebuild_qtensor"},
    "torch.serialization": {"_get_layout"},
    "torch.nn.parameter": {"Parameter"},
    "torch": {"Size", "device", "Tensor", "per_tensor_affine", "per_channel_affine", "strided", "sparse_coo"},
}
_DTYPES = {"float32", "float64", "float16", "bfloat16", "int64", "int32", "int16", "int8", "uint8", "bool",
           "complex64", "complex128", "qint8", "quint8", "qint32", "float8_e4m3fn", "float8_e5m2"}
_STRINGS = ("SHORT_BINUNICODE", "BINUNICODE", "BINUNICODE8", "UNICODE", "SHORT_BINSTRING", "BINSTRING",
            "STRING")
MAX_PICKLE_BYTES = 64 << 20  # a state dict's pickle holds names and shapes only (the tensors lie beside it)
MAX_DEPTH = 2  # an ExportedProgram holds torch.save archives of its own


def _allowed(module: str, name: str) -> bool:
    if name in _ALLOWED.get(module, ()):
        return True
    return module == "torch" and (name.endswith("Storage") or name in _DTYPES)


def globals_named(data: bytes, where: str) -> list[tuple[str, str]]:
    """Every global a pickle names (module, name), read with pickletools (nothing runs). BundleError where
    the names cannot be told (a global taken from anything but the two strings pushed right before it)."""
    found: list[tuple[str, str]] = []
    strings: list[str | None] = []  # what each op pushed, where it was a string (None: anything else)
    memo: dict[object, str | None] = {}
    try:
        for op, arg, _ in pickletools.genops(data):
            n = op.name
            if n in ("GLOBAL", "INST"):
                module, _, name = str(arg).partition(" ")
                found.append((module, name))
                strings.append(None)
            elif n == "STACK_GLOBAL":
                if len(strings) < 2 or strings[-1] is None or strings[-2] is None:
                    raise BundleError(f"bundle: {where} names a global that cannot be told from its pickle; "
                                      "refused")
                found.append((str(strings[-2]), str(strings[-1])))
                strings.append(None)
            elif n in ("EXT1", "EXT2", "EXT4"):
                raise BundleError(f"bundle: {where} names a global through the pickle extension registry; "
                                  "refused")
            elif n in ("PROTO", "FRAME"):  # framing: pushes nothing
                continue
            elif n in _STRINGS:
                strings.append(str(arg))
            elif n in ("MEMOIZE", "PUT", "BINPUT", "LONG_BINPUT"):
                memo[len(memo) if n == "MEMOIZE" else arg] = strings[-1] if strings else None
            elif n in ("GET", "BINGET", "LONG_BINGET"):
                strings.append(memo.get(arg))
            else:
                strings.append(None)
    except (ValueError, EOFError) as e:  # not a pickle, or a truncated one
        raise BundleError(f"bundle: {where} is not a readable pickle ({' '.join(str(e).split())[:120]}); "
                          "refused") from None
    return found


def _check_archive(f: IO[bytes], where: str, depth: int) -> int:
    """Pickles checked in an archive and the archives inside it; how many."""
    n = 0
    try:
        with zipfile.ZipFile(f) as z:
            for info in z.infolist():
                at = f"{where}:{info.filename}"
                if not info.filename.endswith((".pkl", ".pt")):
                    continue
                if info.file_size > MAX_PICKLE_BYTES and info.filename.endswith(".pkl"):
                    raise BundleError(f"bundle: {at} declares {info.file_size:,} bytes of pickle; refused")
                with z.open(info) as m:
                    if info.filename.endswith(".pt"):  # torch.save's archive inside (an ExportedProgram's)
                        if depth >= MAX_DEPTH:
                            raise BundleError(f"bundle: {at} nests archives too deeply; refused")
                        if info.compress_type != zipfile.ZIP_STORED and info.file_size > MAX_PICKLE_BYTES:
                            raise BundleError(f"bundle: {at} declares {info.file_size:,} compressed bytes; "
                                              "refused")
                        n += _check_archive(io.BytesIO(m.read()) if info.compress_type else m, at, depth + 1)
                        continue
                    for module, name in globals_named(m.read(MAX_PICKLE_BYTES + 1), at):
                        if not _allowed(module, name):
                            raise BundleError(f"bundle: {at} names {module}.{name}: not a weights-only file "
                                              "(unpickling it could run code); refused")
                    n += 1
    except (zipfile.BadZipFile, zipfile.LargeZipFile, NotImplementedError, RuntimeError, EOFError) as e:
        raise BundleError(f"bundle: {where} is not a readable torch archive ({e}); refused") from None
    return n


def check_weights_only(path: Path, rel: str) -> None:
    """``rel`` (at ``path``): a zip-format torch file every pickle of which is weights-only; BundleError
    (one line) otherwise: a legacy pickle file, a TorchScript archive (code), a pickled module."""
    with open(path, "rb") as f:
        if not zipfile.is_zipfile(f):
            raise BundleError(f"bundle: {rel} is not a zip-format torch file (torch.save of a state dict, or "
                              "torch.export.save); refused")
        f.seek(0)
        with zipfile.ZipFile(f) as z:
            names = z.namelist()
        if any(n.split("/", 1)[-1].startswith("code/") for n in names):
            raise BundleError(f"bundle: {rel} is a TorchScript archive (code); bundles carry weights-only "
                              "state dicts or ExportedPrograms; refused")
        f.seek(0)
        if _check_archive(f, rel, 0) == 0:
            raise BundleError(f"bundle: {rel} holds no state dict or ExportedProgram; refused")
