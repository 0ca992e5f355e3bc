"""How long each GPU was held, and how long it stood idle, in a run whose GPUs were measured by processes
taking turns (host/gpu_turn.py): from the rows' ``extra.gpu_turn.held`` (each turn's [taken, let go], epoch
seconds), per GPU: the span from its first hold to its last, the seconds some process held it (the union of
the holds), the idle seconds inside the span and the longest idle gaps (with the configurations on either
side); then the run's fixed parts: from the earliest hold of any GPU back to the run's start, and from the
last hold to the run's end (``elapsed_s`` of the report, whose clock starts when the comparison starts, after
the interpreter and the CLI).

    python benchmarks/gpu_busy.py RESULTS.json [RESULTS.json ...] [--gaps 3] [--walls WALLS.txt]

``--walls``: the walls.txt of benchmarks/gpu/startup_local.sh (each run's name, wall seconds and start, epoch
seconds): for each report in a folder of a run's name, also the first hold's seconds after the command started
and the last hold's before it ended (what does not halve with a second GPU: start-up, and the report and
exit).

A hold that ends after a configuration's last row (its full parity, the resident's reset) is counted in the
next row of its process, or not at all after that process's last row: the busy figure is a lower bound, by
those milliseconds. Prints one block per report; exit 0 always (it reports, it does not judge)."""

from __future__ import annotations

import argparse
import json
import os


def _holds(rep: dict) -> dict[str, list[tuple[float, float, str]]]:
    """GPU (index and name) -> its holds (taken, let go, the row that recorded it)."""
    out: dict[str, list[tuple[float, float, str]]] = {}
    for r in rep["rows"]:
        x = r.get("extra") or {}
        held = (x.get("gpu_turn") or {}).get("held") or []
        if not held:
            continue
        gpu = f"GPU {x.get('gpu_index', r['device'])} ({x.get('gpu_name', '?')})"
        who = f"{r['backend']} {r['precision']} b{r['batch_size']} (process {x.get('gpu_process', '?')})"
        out.setdefault(gpu, []).extend((float(a), float(b), who) for a, b in held)
    return out


def _union(holds: list[tuple[float, float, str]]) -> tuple[float, list[tuple[float, float, str, str]]]:
    """(seconds covered by the holds, the gaps between them: (start, end, the row before, the row after))."""
    busy, gaps = 0.0, []
    spans = sorted(holds)
    cur0, cur1, cur_who = spans[0]
    for a, b, who in spans[1:]:
        if a > cur1:
            busy += cur1 - cur0
            gaps.append((cur1, a, cur_who, who))
            cur0, cur1, cur_who = a, b, who
        elif b > cur1:
            cur1, cur_who = b, who
    return busy + (cur1 - cur0), gaps


def read_walls(path: str | None) -> dict[str, tuple[float, float]]:
    """Run name -> (start epoch, wall seconds), from startup_local.sh's walls.txt lines that have a start."""
    out: dict[str, tuple[float, float]] = {}
    for line in open(path).read().splitlines() if path else ():
        f = dict(w.split("=", 1) for w in line.split()[1:] if "=" in w)
        if "start" in f and "wall_s" in f:
            out[line.split()[0]] = (float(f["start"]), float(f["wall_s"]))
    return out


def report(path: str, n_gaps: int, walls: dict[str, tuple[float, float]] | None = None) -> None:
    rep = json.load(open(path))
    per_gpu = _holds(rep)
    print(f"== {path}: elapsed {rep.get('elapsed_s')} s")
    if not per_gpu:
        print("  no row says when its process held its GPU (no turns, or a report from before the holds "
              "were kept)")
        return
    first = min(a for hs in per_gpu.values() for a, _, _ in hs)
    last = max(b for hs in per_gpu.values() for _, b, _ in hs)
    for gpu, hs in sorted(per_gpu.items()):
        busy, gaps = _union(hs)
        lo, hi = min(a for a, _, _ in hs), max(b for _, b, _ in hs)
        span = hi - lo
        print(f"  {gpu}: first hold +{lo - first:.1f} s, last +{hi - first:.1f} s: span {span:.1f} s, held "
              f"{busy:.1f} s ({100 * busy / span:.0f} %), idle {span - busy:.1f} s in {len(gaps)} gaps")
        for g0, g1, before, after in sorted(gaps, key=lambda g: g[0] - g[1])[:n_gaps]:
            print(f"    idle {g1 - g0:.2f} s at +{g0 - first:.1f} s, after {before}, before {after}")
    elapsed = float(rep.get("elapsed_s") or 0)
    print(f"  all GPUs' holds span {last - first:.1f} s of the "
          f"report's {elapsed:.1f} s: {elapsed - (last - first):.1f} s before the first hold and "
          "after the last")
    run = os.path.basename(os.path.dirname(os.path.abspath(path)))
    if walls and run in walls:
        start, wall = walls[run]
        print(f"  the command ({wall:.1f} s): first hold {first - start:.2f} s after its start, last hold "
              f"{start + wall - last:.2f} s before its end")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("results", nargs="+")
    ap.add_argument("--gaps", type=int, default=3, help="the longest idle gaps to show per GPU (default 3)")
    ap.add_argument("--walls", help="benchmarks/gpu/startup_local.sh's walls.txt: holds against each "
                    "command's start and end")
    a = ap.parse_args()
    walls = read_walls(a.walls)
    for path in a.results:
        report(path, a.gaps, walls)


if __name__ == "__main__":
    main()
