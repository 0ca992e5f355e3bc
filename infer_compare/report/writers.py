"""What writing a report imports at its first call beyond the CLI's own modules (matplotlib for the HTML
plots: 0.5-0.6 s on the 2-core VM), and an import of them that never fails, for a caller with a wait to spend:
the fleet's driver while the nodes measure (fleet/overlap.py), the A/B gate while its fork servers import
(regress/ab_servers.py), a comparison once no CPU configuration is left to measure (measure/prefetch.py). A
prefetch that fails is ignored: the real import, when the report is written, says what is wrong."""

from __future__ import annotations

import importlib
from collections.abc import Sequence

# report/plots.py and its _svg
REPORT_WRITERS = ("matplotlib", "matplotlib.figure", "matplotlib.backends.backend_svg",
                  "infer_compare.report.plots")


def import_writers(modules: Sequence[str] = REPORT_WRITERS) -> list[str]:
    """Import ``modules`` in order, stopping at the first that fails; the modules that imported."""
    done = []
    for m in modules:
        try:
            importlib.import_module(m)
            done.append(m)
        except Exception:  # noqa: BLE001 - a prefetch never fails the run
            break
    return done
