"""The null runtime: a runner that returns a constant, to measure the harness's own
per-call overhead. It is also the smallest complete example of a runtime package."""

from infer_compare.catalog.runtimes import RunnerInfo, Runtime

RUNTIME = Runtime(
    name="null",
    title="null (harness overhead)",
    order=90,
    runners=(
        RunnerInfo("null", "null (harness overhead)", "infer_compare.backends.null.run:NullRunner", ("cpu",),
                   formats=(), options="infer_compare.backends.null.options:NullOptions", listed=False),
    ),
)
