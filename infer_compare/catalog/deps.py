"""Lazy optional imports with install hints.

Nothing here imports a heavy library: ``has()`` asks importlib for the module spec,
``version()`` reads installed distribution metadata.
"""

from __future__ import annotations

import importlib
import importlib.metadata as md
import importlib.util
import re
from functools import lru_cache
from typing import Any

from infer_compare.base.errors import BackendUnavailable
from infer_compare.catalog.runtimes import libraries

# Modules of the core (data, GPU facts, reports); each runtime declares its own in
# backends/<runtime>/__init__.py (Library: module, distributions, install hint).
CORE: dict[str, tuple[tuple[str, ...], str]] = {
    "numpy": (("numpy",), "pip install numpy"),
    "sklearn": (("scikit-learn",), "pip install 'infer-compare[data]'"),
    "skimage": (("scikit-image",), "pip install 'infer-compare[data]'"),
    "PIL": (("pillow", "Pillow"), "pip install pillow"),
    "pynvml": (("nvidia-ml-py", "pynvml"), "pip install 'infer-compare[gpu]'  (nvidia-ml-py)"),
    "matplotlib": (("matplotlib",), "pip install 'infer-compare[report]'"),
    "scipy": (("scipy",), "pip install 'infer-compare[report]'"),
    "cpuinfo": (("py-cpuinfo",), "pip install py-cpuinfo"),
}
# Core libraries recorded in every report's environment (with every runtime's own).
CORE_VERSIONED = ("numpy", "sklearn", "skimage", "PIL", "pynvml")


def known() -> dict[str, tuple[tuple[str, ...], str]]:
    """Module -> (distributions, install hint): the core's and every runtime's."""
    return {**CORE, **{m: (lib.dists, lib.hint) for m, lib in libraries().items()}}


def has(module: str) -> bool:
    """True when ``module`` can be imported (without importing it)."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def hint(module: str) -> str:
    return installable(known().get(module, ((), f"pip install {module}"))[1])


_EXTRA = re.compile(r"'infer-compare\[([A-Za-z0-9_,-]+)\]'")


def installable(text: str) -> str:
    """``text`` with each ``'infer-compare[extra]'`` written as the extra's own requirements, as the
    installed infer-compare declares them: the package is not on a package index, so ``pip install
    'infer-compare[openvino]'`` cannot work where it was installed from a wheel or a clone, while ``pip
    install 'openvino>=2024.0' 'nncf>=2.10'`` does. Unchanged where the metadata is not found."""
    def spelled(m: re.Match) -> str:
        return " ".join(f"'{r}'" for r in extra_requirements(m.group(1))) or m.group(0)

    return _EXTRA.sub(spelled, text)


@lru_cache(maxsize=64)
def extra_requirements(extras: str) -> tuple[str, ...]:
    """The requirements of infer-compare's extras (comma-separated), nested extras expanded, in the order
    its metadata lists them; () where infer-compare's metadata is not found."""
    try:
        reqs = md.requires("infer-compare") or []
    except md.PackageNotFoundError:
        return ()
    out: list[str] = []
    for name in extras.split(","):
        for req in reqs:
            spec, _, marker = req.partition(";")
            if f'extra == "{name.strip()}"' not in marker.replace("'", '"'):
                continue
            inner = _EXTRA.search(f"'{spec.strip()}'")
            for r in extra_requirements(inner.group(1)) if inner else (spec.strip(),):
                if r not in out:
                    out.append(r)
    return tuple(out)


def version(module_or_dist: str) -> str | None:
    """The installed version of a module (via its known distributions) or distribution. Where several
    distributions provide the module (onnxruntime and onnxruntime-gpu), the one whose files hold the
    module that imports wins; nothing is imported."""
    dists = known().get(module_or_dist, ((module_or_dist,), ""))[0]
    found = []
    for dist in dists:
        try:
            found.append((dist, md.version(dist)))
        except md.PackageNotFoundError:
            continue
    if len(found) > 1:
        origin = _origin(module_or_dist)
        for dist, v in found:
            try:
                files = md.distribution(dist).files or ()
                if origin and any(str(md.distribution(dist).locate_file(f)) == origin for f in files
                                  if str(f).endswith("__init__.py")):
                    return v
            except Exception:
                continue
    return found[0][1] if found else None


def _origin(module: str) -> str | None:
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return None
    return str(spec.origin) if spec is not None and spec.origin else None


def require(module: str, purpose: str = "") -> Any:
    """Import ``module`` or raise BackendUnavailable with its install hint."""
    if not has(module):
        what = f" (needed for {purpose})" if purpose else ""
        raise BackendUnavailable(f"Python module '{module}' is not installed{what}", hint(module))
    try:
        return importlib.import_module(module)
    except Exception as e:  # a broken install is a reason, not a crash
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise BackendUnavailable(f"'{module}' is installed but fails to import: {first}", hint(module)) from e


def library_versions() -> dict[str, str]:
    """Installed versions of the core's and every runtime's recorded libraries, by distribution name."""
    table = known()
    modules = ([CORE_VERSIONED[0]] + [m for m, lib in libraries().items() if lib.record_version]
               + list(CORE_VERSIONED[1:]))
    out = {}
    for m in modules:
        v = version(m)
        if v is not None:
            out[table.get(m, ((m,), ""))[0][0]] = v
    return out
