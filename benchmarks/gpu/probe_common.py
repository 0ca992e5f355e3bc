"""What the torch.compile probes (compile_warm_probe.py, first_compile_probe.py) share: a row's
load-time calls on a zero batch, and a call under cProfile."""

from __future__ import annotations

import time


def warm_calls(model, torch, batch: int, dtype) -> float:
    """Seconds of what a row's load does on the measured shape: 3 calls on a channels_last zero batch,
    synchronized."""
    t0 = time.perf_counter()
    x = torch.zeros((batch, 3, 224, 224), device="cuda",
                    dtype=dtype).contiguous(memory_format=torch.channels_last)
    with torch.inference_mode():
        for _ in range(3):
            model(x)
    torch.cuda.synchronize()
    return round(time.perf_counter() - t0, 3)


def profiled(fn, n: int, out: dict, key: str, keep: int = 12000, callees: str = ""):
    """``fn()`` under cProfile; into ``out``: ``KEY_cumulative`` and ``KEY_tottime``, the ``n`` costliest
    functions (the last ``keep`` characters), and with ``callees`` (a regular expression) ``KEY_callees``,
    what those called."""
    import cProfile
    import io
    import pstats

    pr = cProfile.Profile()
    pr.enable()
    got = fn()
    pr.disable()
    for order in ("cumulative", "tottime"):
        s = io.StringIO()
        pstats.Stats(pr, stream=s).sort_stats(order).print_stats(n)
        out[f"{key}_{order}"] = s.getvalue()[-keep:]
    if callees:
        s = io.StringIO()
        pstats.Stats(pr, stream=s).sort_stats("cumulative").print_callees(callees)
        out[f"{key}_callees"] = s.getvalue()[:60000]
    return got
