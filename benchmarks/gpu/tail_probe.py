"""The comparison's tail, after its last row: writing the report (json, md, csv, html with
its plots) and printing the table, timed in a fresh interpreter from a saved results.json.

Usage: python3 benchmarks/gpu/tail_probe.py RESULTS.json OUTDIR [--prefetch | --warm] [--profile]
  --prefetch: the report writers imported first (report/writers.py), their import time printed apart
  --warm: imported, then one tiny figure drawn (round 8 tried that in the comparison's prefetch thread; with
          no gain on the lent machine or here it was taken out again)
  --profile: the 12 functions the HTML writing spent most time in, by cumulative time"""

from __future__ import annotations

import io
import json
import sys
import time
from contextlib import redirect_stdout
from pathlib import Path

T0 = time.perf_counter()


def _draw_once() -> None:
    """A tiny figure drawn to SVG as report/plots.py draws (constrained layout, a log axis, a legend, a box
    plot)."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(2, 1.5), dpi=96, layout="constrained")
    ax = fig.add_subplot()
    ax.set_xscale("log")
    ax.plot([1, 10, 100], [1, 2, 3], marker="o", label="warm-up")
    ax.boxplot([[1.0, 2.0, 3.0]])
    ax.legend()
    fig.savefig(io.StringIO(), format="svg")


def main() -> None:
    src, out = sys.argv[1], Path(sys.argv[2])
    res: dict = {"prefetch": "--prefetch" in sys.argv, "warm": "--warm" in sys.argv}
    t = time.perf_counter()
    from infer_compare.base.records import load_report
    from infer_compare.report import write_all
    from infer_compare.report.terminal import print_report

    rep = load_report(src)
    res["import_load_s"] = round(time.perf_counter() - t, 3)
    if res["prefetch"] or res["warm"]:
        t = time.perf_counter()
        from infer_compare.report.writers import import_writers

        res["prefetched"] = import_writers()
        if res["warm"]:
            _draw_once()
        res["prefetch_s"] = round(time.perf_counter() - t, 3)
    profile = None
    for fmt in ("json", "md", "csv", "html"):
        t = time.perf_counter()
        if fmt == "html" and "--profile" in sys.argv:
            import cProfile

            profile = cProfile.Profile()
            profile.runcall(write_all, rep, out, (fmt,))
        else:
            write_all(rep, out, (fmt,))
        res[f"write_{fmt}_s"] = round(time.perf_counter() - t, 3)
    t = time.perf_counter()
    with redirect_stdout(io.StringIO()):
        print_report(rep)
    res["print_s"] = round(time.perf_counter() - t, 3)
    res["total_s"] = round(time.perf_counter() - T0, 3)
    print("TAIL " + json.dumps(res))
    if profile is not None:
        import pstats

        pstats.Stats(profile).sort_stats("cumulative").print_stats(12)


if __name__ == "__main__":
    main()
