"""The live progress line (issue 23, point 7): it names the phase in progress (an export, with its own
elapsed time, then measuring), its measuring total is reached at the end even when cells are skipped, and
a phase without a total shows a spinner and the elapsed time, never "0/?"."""

import io
import shutil

from rich.console import Console

from infer_compare.base.progress import Progress
from infer_compare.base.records import SKIPPED
from infer_compare.cli.progress import RichProgress, _columns

from .conftest import FAST


def _rendered(prog: RichProgress, task) -> str:
    con = Console(file=io.StringIO(), width=120, no_color=True)
    with con.capture() as cap:
        for col in _columns():
            con.print(col.render(task), end=" ")
    return cap.get()


def _visible(prog: RichProgress) -> list:
    return [t for t in prog.p.tasks if t.visible]


def test_rich_progress_names_the_phase_and_reaches_its_total():
    prog = RichProgress(quiet=False, console=Console(file=io.StringIO(), width=100, record=True))
    prog.task("probing the environment")
    out = _rendered(prog, _visible(prog)[0])
    assert "probing the environment" in out and "0/?" not in out and "?" not in out and "0:00:00" in out
    prog.task("measuring", total=3)
    prog.step("onnxruntime onnx fp32 cpu batch 1")
    assert [t.description for t in _visible(prog)] == ["measuring onnxruntime onnx fp32 cpu batch 1"]
    with prog.phase("exporting TFLite int8"):
        shown = _visible(prog)
        assert [t.description for t in shown] == ["exporting TFLite int8"] and shown[0].total is None
        assert "0/?" not in _rendered(prog, shown[0])
    assert [t.description for t in _visible(prog)] == ["measuring onnxruntime onnx fp32 cpu batch 1"]
    for _ in range(3):
        prog.advance()
    task = _visible(prog)[0]
    assert task.completed == task.total == 3 and "3/3" in _rendered(prog, task)


class _Recorder(Progress):
    def __init__(self):
        self.events: list[tuple] = []
        self.total: int | None = None
        self.done = 0

    def task(self, msg, total=None):
        self.events.append(("task", msg))
        self.total, self.done = total, 0

    def step(self, msg):
        self.events.append(("step", msg))

    def advance(self, msg=None):
        self.done += 1

    def phase(self, msg):
        self.events.append(("phase", msg))
        return super().phase(msg)


def test_a_run_with_skipped_cells_reaches_its_total_and_announces_its_export(cache_dir, tmp_path):
    from infer_compare import compare

    private = tmp_path / "cache"  # a cache of its own, so that the ONNX export is built (and announced) here
    if (cache_dir / "weights").is_dir():
        shutil.copytree(cache_dir / "weights", private / "weights")  # the trained LeNet-5, not its artifacts
    rec = _Recorder()
    rep = compare("lenet5", backends=["onnxruntime", "tensorrt"], precisions=["fp32", "tf32"],
                  batch_sizes=[1, 4], cache_dir=private, progress=rec, **FAST)
    assert any(r.status == SKIPPED and r.device == "cpu" for r in rep.rows)  # tf32 on the CPU: a skipped cell
    assert rec.total is not None and rec.total > 2 and rec.done == rec.total
    names = [e for e in rec.events if e[0] in ("phase", "step", "task")]
    i_measure = names.index(("task", "measuring"))
    i_export = names.index(("phase", "exporting ONNX fp32"))
    i_step = next(i for i, e in enumerate(names)
                  if e[0] == "step" and e[1].startswith("onnxruntime onnx fp32 cpu"))
    assert i_measure < i_export < i_step
