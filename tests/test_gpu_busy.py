"""benchmarks/gpu_busy.py: a GPU's held and idle seconds from the rows' turn holds (host/gpu_turn.py), on a
constructed report (no measured time is asserted)."""

from __future__ import annotations

import json

from tests.bench_modules import bench_module


def _busy():
    return bench_module("gpu_busy")


def _row(gpu: int, process: int, precision: str, held: list[list[float]]) -> dict:
    return {"backend": "pytorch", "precision": precision, "batch_size": 1, "device": f"cuda:{gpu}",
            "status": "ok",
            "extra": {"gpu_index": gpu, "gpu_name": "H", "gpu_process": process,
                      "gpu_turn": {"waited_s": 0.0, "compiled_beside_s": 0.0, "held": held}}}


def test_held_and_idle_seconds_per_gpu_and_the_longest_gaps(tmp_path, capsys):
    t = 1_000_000.0
    # GPU 0: 0-4, 5-6 and (process 2) 6-9, 12-13
    rows = [_row(0, 1, "fp32", [[t + 0, t + 4], [t + 5, t + 6]]),
            _row(0, 2, "tf32", [[t + 6, t + 9], [t + 12, t + 13]]),
            _row(1, 1, "fp16", [[t + 1, t + 3], [t + 2.5, t + 7]])]  # GPU 1: overlapping holds count once
    path = tmp_path / "results.json"
    path.write_text(json.dumps({"rows": rows, "elapsed_s": 20.0}))
    gb = _busy()
    busy, gaps = gb._union([(a, b, "x") for r in rows[:2] for a, b in r["extra"]["gpu_turn"]["held"]])
    assert busy == 9.0 and [(round(g1 - g0, 3)) for g0, g1, _, _ in gaps] == [1.0, 3.0]
    gb.report(str(path), 1)
    out = capsys.readouterr().out
    assert ("GPU 0 (H): first hold +0.0 s, last +13.0 s: span 13.0 s, held 9.0 s (69 %), idle 4.0 s in 2 "
            "gaps") in out
    assert ("idle 3.00 s at +9.0 s, after pytorch tf32 b1 (process 2), before pytorch tf32 b1 "
            "(process 2)") in out
    assert ("GPU 1 (H): first hold +1.0 s, last +7.0 s: span 6.0 s, held 6.0 s (100 %), idle 0.0 s in 0 "
            "gaps") in out
    assert ("all GPUs' holds span 13.0 s of the report's 20.0 s: 7.0 s before the first hold and after the "
            "last") in out


def test_a_report_without_holds_says_so(tmp_path, capsys):
    path = tmp_path / "results.json"
    path.write_text(json.dumps({"rows": [_row(0, 1, "fp32", [])], "elapsed_s": 5.0}))
    _busy().report(str(path), 3)
    assert "no row says when its process held its GPU" in capsys.readouterr().out


def test_the_holds_against_the_commands_start_and_end_from_startup_locals_walls(tmp_path, capsys):
    t = 1_000_000.0
    run = tmp_path / "two-gpus-warm-1"
    run.mkdir()
    (run / "results.json").write_text(json.dumps({"rows": [_row(0, 1, "fp32", [[t + 3.5, t + 20]])],
                                                  "elapsed_s": 21}))
    walls = tmp_path / "walls.txt"
    walls.write_text("two-gpus-cold rc=0 wall_s=70.0 code=/x X=1\ntwo-gpus-warm-1 rc=0 wall_s=22.5 "
                     f"start={t} code=/x X=1\n")
    gb = _busy()
    assert gb.read_walls(str(walls)) == {"two-gpus-warm-1": (t, 22.5)}  # a line without a start is left out
    gb.report(str(run / "results.json"), 1, gb.read_walls(str(walls)))
    assert "the command (22.5 s): first hold 3.50 s after its start, last hold 2.50 s before its end" in \
        capsys.readouterr().out
