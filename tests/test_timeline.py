"""Where the wall time went (base/timeline.py): spans in the report, summed up under the table."""

import time
from types import SimpleNamespace

from infer_compare.base.records import load_report
from infer_compare.base.timeline import ARTIFACT, CONFIGURATION, PREPARE, TimedProgress, Timeline, summary


def test_spans_follow_each_other_and_the_open_one_counts_up_to_now():
    tl = Timeline(time.perf_counter())
    tl.mark("a", PREPARE)
    time.sleep(0.02)
    tl.mark("b", CONFIGURATION)
    time.sleep(0.01)
    got = tl.spans()
    assert [s["what"] for s in got] == ["a", "b"]
    assert got[0]["wall_s"] >= 0.02 and got[1]["wall_s"] >= 0.01
    assert abs(got[1]["start_s"] - (got[0]["start_s"] + got[0]["wall_s"])) < 0.005  # no gap between them
    tl.close()
    assert len(tl.spans()) == 2


def test_timed_progress_marks_tasks_and_passes_everything_on():
    seen = []
    inner = SimpleNamespace(task=lambda m, total=None: seen.append(("task", m)),
                            log=lambda m: seen.append(("log", m)))
    tl = Timeline()
    prog = TimedProgress(inner, tl)
    prog.task("loading weights")
    prog.log("hello")
    assert seen == [("task", "loading weights"), ("log", "hello")]
    assert tl.spans()[0]["what"] == "loading weights" and tl.spans()[0]["kind"] == PREPARE


def _row(load, first_ms, warm_ns, wall):
    return SimpleNamespace(load_s=load, first_infer_ms=first_ms, measured_wall_s=wall,
                           extra={"loop": {"warmup_ns": warm_ns}})


def test_summary_splits_the_configurations_with_the_rows_figures():
    spans = ({"what": "p", "kind": PREPARE, "start_s": 0.0, "wall_s": 4.0},
             {"what": "x", "kind": ARTIFACT, "start_s": 4.0, "wall_s": 1.0},
             {"what": "c", "kind": CONFIGURATION, "start_s": 5.0, "wall_s": 10.0})
    skipped = SimpleNamespace(load_s=None, first_infer_ms=None, measured_wall_s=None, extra={})
    rep = SimpleNamespace(timeline=spans, elapsed_s=15.2,
                          rows=[_row(2.0, 500.0, 0.2e9, 1.0), _row(1.0, 500.0, 0.3e9, 2.0), skipped])
    got = summary(rep)
    assert got.startswith("time: 15.2 s: preparing 4.0 s, artifacts 1.0 s, configurations 10.0 s")
    assert "loading 3.0 s, cold first calls 1.0 s, warm-up 0.5 s, measuring 3.0 s" in got
    assert "the rest 2.5 s" in got
    assert summary(SimpleNamespace(timeline=(), rows=[], elapsed_s=1.0)) == ""  # older files: nothing


def test_a_real_comparison_has_its_timeline_in_json_and_reports(lenet_report, tmp_path):
    spans = lenet_report.timeline
    kinds = {s["kind"] for s in spans}
    assert {PREPARE, ARTIFACT, CONFIGURATION} <= kinds
    assert any(s["what"].startswith("onnxruntime onnx fp32 cpu") and s["kind"] == CONFIGURATION
               for s in spans)
    total = sum(s["wall_s"] for s in spans)
    assert total <= lenet_report.elapsed_s + 0.5  # spans do not overlap
    lenet_report.save(tmp_path / "r.json")
    back = load_report(tmp_path / "r.json")
    assert back.timeline == spans
    from infer_compare.report import common

    assert any(line.startswith("time: ") for line in common.env_lines(back))


def test_summary_says_how_much_of_loading_was_torch_compile():
    spans = ({"what": "c", "kind": CONFIGURATION, "start_s": 0.0, "wall_s": 10.0},)
    compiled = _row(4.0, 10.0, 0.0, 1.0)
    compiled.options = {"compile_s": 3.5}
    rep = SimpleNamespace(timeline=spans, elapsed_s=10.0, rows=[compiled, _row(1.0, 10.0, 0.0, 1.0)])
    assert "loading 5.0 s of which torch.compile 3.5 s, cold first calls" in summary(rep)
