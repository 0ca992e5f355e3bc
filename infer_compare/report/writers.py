"""What writing a report imports at its first call beyond the CLI's own modules (matplotlib for the HTML plots:
0.5-0.6 s on the 2-core VM), and an import of them that never fails, for a caller with a wait to spend: the
fleet's driver while the nodes measure (fleet/overlap.py), the A/B gate while its fork servers import
(regress/ab_servers.py), a comparison once no CPU configuration is left to measure (measure/prefetch.py). A
prefetch that fails is ignored: the real import, when the report is written, says what is wrong."""

from __future__ import annotations

import importlib
from collections.abc import Sequence

# report/plots.py and its _svg
REPORT_WRITERS = ("matplotlib", "matplotlib.figure", "matplotlib.backends.backend_svg", "infer_compare.report.plots")


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


def draw_once() -> bool:
    """A tiny figure drawn to SVG, as report/plots.py draws (constrained layout, a log axis, a legend, a box plot):
    matplotlib's first drawing sets up fonts and text layout once per process (0.35 s of a resnet50 report's 1.05 s
    of plots on the 2-core VM; 0.08 s for this figure). True where it drew; never raises. Not beside another
    thread's drawing: matplotlib's font objects are shared (measure/prefetch.py joins its thread first)."""
    try:
        import io

        from matplotlib.figure import Figure

        fig = Figure(figsize=(2, 1.5), dpi=96, layout="constrained")
        ax = fig.add_subplot()
        ax.set_xscale("log")
        ax.plot([1, 10, 100], [1, 2, 3], marker="o", label="warm-up")
        ax.boxplot([[1.0, 2.0, 3.0]])
        ax.set_xlabel("ms")
        ax.legend()
        fig.savefig(io.StringIO(), format="svg")
        return True
    except Exception:  # noqa: BLE001 - a warm-up never fails the run
        return False
