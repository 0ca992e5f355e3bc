"""Each row of one results.json against the same row of another (issue 37's fidelity table): p50 latency
and throughput of rows measured in parallel (several GPUs at once, or through the fleet) over the same
configuration measured alone, matched by backend/format/precision/batch (and scenario, variant), the
device ignored (a parallel row may have run on the other, identical GPU: its gpu_index is shown).

    python benchmarks/gpu_fidelity.py PARALLEL/results.json ALONE/results.json [--kind cuda] [--limit 3]

Prints a markdown table, a summary line and one per batch size (with the median p50 ratio, parallel over
alone: a bias shows there even where single rows scatter); exit 0 always (it reports, it does not judge)."""

from __future__ import annotations

import argparse
import json
import statistics


def _key(r: dict) -> tuple:
    return (r["backend"], r["format"], r["precision"], r["batch_size"], r.get("scenario") or "latency",
            r.get("variant") or "")


def _rows(path: str, kind: str, machine: str | None) -> dict[tuple, list[dict]]:
    out: dict[tuple, list[dict]] = {}
    for r in json.load(open(path))["rows"]:
        dev = (r["device"].split(":", 1)[1] if machine and r["device"].startswith(machine + ":")
               else r["device"])
        if r["status"] != "ok" or not dev.startswith(kind):
            continue
        out.setdefault(_key(r), []).append({**r, "device": dev})
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("parallel")
    ap.add_argument("alone")
    ap.add_argument("--kind", default="cuda", help="device kind of the rows compared (cuda, cpu)")
    ap.add_argument("--limit", type=float, default=3.0, help="the band, percent (default 3)")
    ap.add_argument("--machine", help="a merged (fleet) report: the node whose rows to take")
    a = ap.parse_args()
    par, alone = _rows(a.parallel, a.kind, a.machine), _rows(a.alone, a.kind, None)
    print("| row | GPU (parallel) | p50 alone ms | p50 parallel ms | Δ p50 | img/s alone | img/s "
          "parallel | Δ img/s |")
    print("|---|---|---|---|---|---|---|---|")
    inside = total = 0
    by: dict[int, list] = {}  # batch size -> [rows inside, rows, p50 ratios]
    for k in sorted(par, key=lambda k: (k[0], k[1], k[2], k[3])):
        if k not in alone:
            continue
        for p in par[k]:
            ref = next((x for x in alone[k] if x["device"] == p["device"]), alone[k][0])
            lp, la = p["latency"]["p50_ms"], ref["latency"]["p50_ms"]
            tp, ta = p["throughput"], ref["throughput"]
            dl, dt = 100 * (lp / la - 1), 100 * (tp / ta - 1)
            ok = abs(dl) <= a.limit and abs(dt) <= a.limit
            inside += ok
            total += 1
            b = by.setdefault(k[3], [0, 0, []])
            b[0], b[1] = b[0] + ok, b[1] + 1
            b[2].append(lp / la)
            where = f"{p['device']} (GPU {p.get('extra', {}).get('gpu_index', '?')})"
            print(f"| {k[0]}/{k[1]}/{k[2]}/b{k[3]} | {where} | {la:.3f} | {lp:.3f} | {dl:+.1f} % "
                  f"| {ta:,.0f} | {tp:,.0f} | {dt:+.1f} %{'' if ok else ' **outside**'} |")
    print(f"\n{inside} of {total} rows within ±{a.limit:g} % (p50 and img/s)")
    print("by batch size: " + "; ".join(f"b{n} {b[0]}/{b[1]} (median p50 ratio {statistics.median(b[2]):.3f})"
                                       for n, b in sorted(by.items(), reverse=True)))


if __name__ == "__main__":
    main()
