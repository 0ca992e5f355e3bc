"""Issue 37, sixth round: the comparison's tail, after its last row: writing the report (json, md, csv, html with
its plots) and printing the table, timed in a fresh interpreter from a saved results.json.

Usage: python3 scripts/tail_probe.py RESULTS.json OUTDIR [--prefetch]   (--prefetch: the report writers
imported first, as they would be while the rows are measured; their import time printed apart)"""

from __future__ import annotations

import io
import json
import sys
import time
from contextlib import redirect_stdout
from pathlib import Path

T0 = time.perf_counter()


def main() -> None:
    src, out = sys.argv[1], Path(sys.argv[2])
    res: dict = {"prefetch": "--prefetch" in sys.argv}
    t = time.perf_counter()
    from infer_compare.base.records import load_report
    from infer_compare.report import write_all
    from infer_compare.report.terminal import print_report

    rep = load_report(src)
    res["import_load_s"] = round(time.perf_counter() - t, 3)
    if res["prefetch"]:
        t = time.perf_counter()
        from infer_compare.fleet.overlap import REPORT_WRITERS, _import_all

        res["prefetched"] = _import_all(REPORT_WRITERS)
        res["prefetch_s"] = round(time.perf_counter() - t, 3)
    for fmt in ("json", "md", "csv", "html"):
        t = time.perf_counter()
        write_all(rep, out, (fmt,))
        res[f"write_{fmt}_s"] = round(time.perf_counter() - t, 3)
    t = time.perf_counter()
    with redirect_stdout(io.StringIO()):
        print_report(rep)
    res["print_s"] = round(time.perf_counter() - t, 3)
    res["total_s"] = round(time.perf_counter() - T0, 3)
    print("TAIL " + json.dumps(res))


if __name__ == "__main__":
    main()
