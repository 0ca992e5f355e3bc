"""Which GPU takes which configuration when several measure at once (measure/parallel.py Board, with the
runtime of each configuration as measure/lanes.py gives it): a GPU keeps to what its measuring process has
already tuned (torch.compile after the eager rows of the same precision: cuDNN's choices are made), a
precision another GPU has tuned comes last, and no GPU idles while work it may do is left. Stand-in cells
and devices (CPU-only CI)."""

from __future__ import annotations

from infer_compare.measure.lanes import runtime_of
from infer_compare.measure.parallel import Board
from infer_compare.measure.plan import Cell

BOTH = ("cuda:0", "cuda:1")


def _resnet_plan() -> list[tuple[Cell, tuple[str, ...]]]:
    """The GPU configurations of `infer-compare --model resnet50` with ONNX Runtime CUDA, in plan order."""
    cells = [Cell("pytorch", r, p, "cuda", "cuda:0") for r in ("pytorch", "pytorch-compile")
             for p in ("fp32", "tf32", "fp16", "bf16")]
    cells += [Cell("onnx", "onnxruntime", p, "cuda", "cuda:0") for p in ("fp32", "tf32", "fp16")]
    return [(c, BOTH) for c in cells]


def _family(c: Cell) -> tuple[str, str]:
    return (c.kind, runtime_of(c.runner))


def _name(c: Cell | None) -> str:
    return "-" if c is None else f"{c.runner} {c.precision}"


def test_a_gpu_measures_torch_compile_where_its_eager_rows_of_that_precision_ran():
    b = Board(_resnet_plan(), _family)
    assert _name(b.take("cuda:0")) == "pytorch fp32"  # the first configurations in plan order
    assert _name(b.take("cuda:1")) == "pytorch tf32"
    assert _name(b.take("cuda:1")) == "pytorch-compile tf32"  # tf32 is tuned in GPU 1's process
    assert _name(b.take("cuda:1")) == "pytorch fp16"  # same process, a precision no other GPU has tuned
    assert _name(b.take("cuda:0")) == "pytorch-compile fp32"  # fp32 is tuned in GPU 0's process
    assert _name(b.take("cuda:0")) == "pytorch bf16"
    assert _name(b.take("cuda:1")) == "pytorch-compile fp16"
    assert _name(b.take("cuda:0")) == "pytorch-compile bf16"
    # the PyTorch work is done: ONNX Runtime's process next, in plan order, on whichever GPU is free
    assert [_name(b.take(d)) for d in ("cuda:1", "cuda:0", "cuda:1", "cuda:0")] == [
        "onnxruntime fp32", "onnxruntime tf32", "onnxruntime fp16", "-"]


def test_a_precision_tuned_on_another_gpu_comes_last_but_is_still_taken():
    b = Board(_resnet_plan()[:2] + _resnet_plan()[4:6], _family)  # eager fp32, tf32; compile fp32, tf32
    assert _name(b.take("cuda:0")) == "pytorch fp32"
    assert _name(b.take("cuda:1")) == "pytorch tf32"
    assert _name(b.take("cuda:1")) == "pytorch-compile tf32"
    assert _name(b.take("cuda:1")) == "pytorch-compile fp32"  # GPU 1 is free and only this is left: taken
    assert b.take("cuda:0") is None


def test_a_new_runtime_on_an_untouched_precision_before_a_precision_tuned_elsewhere():
    b = Board([(Cell("pytorch", "pytorch-compile", "fp32", "cuda", "cuda:0"), BOTH),
               (Cell("onnx", "onnxruntime", "fp16", "cuda", "cuda:0"), BOTH)], _family)
    b.seen["cuda:0"] = [(("cuda", "pytorch"), "fp32")]  # GPU 0's process has measured eager fp32
    b.seen["cuda:1"] = [(("cuda", "pytorch"), "fp16")]
    assert _name(b.take("cuda:1")) == "onnxruntime fp16"  # GPU 1 leaves compile fp32 to GPU 0
    assert _name(b.take("cuda:0")) == "pytorch-compile fp32"


def test_only_the_devices_a_configuration_allows_and_plan_order_without_a_family():
    work = [(Cell("pytorch", "pytorch", "fp32", "cuda", "cuda:0"), ("cuda:1",)),
            (Cell("pytorch", "pytorch", "tf32", "cuda", "cuda:0"), BOTH),
            (Cell("onnx", "onnxruntime", "fp32", "cpu", "cpu"), ("cpu",))]
    b = Board(work)
    assert [_name(b.take(d)) for d in ("cuda:0", "cuda:0", "cpu", "cuda:1", "cuda:1")] == [
        "pytorch tf32", "-", "onnxruntime fp32", "pytorch fp32", "-"]
    assert b.seen == {}


def test_cpu_and_gpu_configurations_of_one_runtime_are_different_families():
    gpu, cpu = (Cell("pytorch", "pytorch", "fp32", "cuda", "cuda:0"),
                Cell("pytorch", "pytorch", "fp32", "cpu", "cpu"))
    assert _family(gpu) != _family(cpu)
    assert runtime_of("pytorch-compile") == runtime_of("pytorch") and \
        runtime_of("onnxruntime-trt") == "onnxruntime"


def test_where_a_gpus_processes_take_turns_one_traces_while_the_other_measures():
    """measure/lanes.py passes ``traced`` where each GPU has two processes taking turns (host/gpu_turn.py):
    the second process starts on torch.compile (its tracing runs beside the first's eager rows, not after a
    wait for the GPU); each then keeps to its precision; the order among equals follows what the partner is
    on."""
    b = Board(_resnet_plan(), _family, traced=lambda c: c.runner == "pytorch-compile")
    take = lambda who: _name(b.take(who.split("/")[0], who))  # noqa: E731
    assert take("cuda:0/1") == "pytorch fp32"  # the GPU's first process: GPU work first
    assert take("cuda:0/2") == "pytorch-compile tf32"  # its partner is on eager rows: it traces beside them
    assert take("cuda:1/1") == "pytorch fp16"  # another GPU's processes pair up the same way
    assert take("cuda:1/2") == "pytorch-compile bf16"
    assert take("cuda:0/2") == "pytorch tf32"  # then each process keeps to the precision it tuned
    assert take("cuda:0/1") == "pytorch-compile fp32"
    no_turns = Board(_resnet_plan(), _family)  # without ``traced``: as before, plan order among equals
    assert [_name(no_turns.take("cuda:0", w))
            for w in ("cuda:0/1", "cuda:0/2")] == ["pytorch fp32", "pytorch tf32"]


def test_a_process_whose_partner_traces_takes_a_configuration_that_does_not_and_the_other_way_round():
    compiled = Cell("pytorch", "pytorch-compile", "fp16", "cuda", "cuda:0")
    ort = Cell("onnx", "onnxruntime", "fp16", "cuda", "cuda:0")
    for partner_traces, first, wanted in ((True, compiled, "onnxruntime fp16"),
                                          (False, ort, "pytorch-compile fp16")):
        other = ort if first is compiled else compiled
        b = Board([(first, BOTH), (other, BOTH)], _family, traced=lambda c: c.runner == "pytorch-compile")
        b.now["cuda:0/1"] = ("cuda:0", partner_traces)
        assert _name(b.take("cuda:0", "cuda:0/2")) == wanted  # equal ranks: not the first in plan order
    lane = Board([(compiled, ("cpu",)), (ort, ("cpu",))], _family,
                 traced=lambda c: c.runner == "pytorch-compile")
    assert _name(lane.take("cpu", "cpu")) == "pytorch-compile fp16"  # a device's only worker: plan order
