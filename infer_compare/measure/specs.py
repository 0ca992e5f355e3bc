"""What one configuration's measuring process is given (its CellSpec: the artifact, the batch sizes, the loop,
the parity subset) and the artifact chain a run builds from; the comparison's and the soak's."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from infer_compare.artifacts.chain import ArtifactChain
from infer_compare.backends.exporter import ExportContext
from infer_compare.base.batches import count, is_multi
from infer_compare.base.cache import Cache
from infer_compare.base.layout import of_model_info
from infer_compare.base.progress import Progress
from infer_compare.base.records import ExportRecord, Settings
from infer_compare.catalog.formats import RUNNERS
from infer_compare.measure import passes
from infer_compare.measure.bench import LoopSettings
from infer_compare.measure.cells import CellSpec
from infer_compare.measure.plan import Cell, Selection
from infer_compare.prepare.prepared import Prepared

MIN_PARITY_SUBSET = 8  # images compared at the smaller batch sizes (all of them at the largest)
# warm-up until steady on these device kinds
STABLE_WARMUP_KINDS = ("cuda",)


def _parity_limits(batches: tuple[int, ...], n: int, every_batch: bool) -> dict[str, int]:
    """Images compared per batch size: all at the largest (or everywhere), a subset elsewhere."""
    if every_batch:
        return {}
    top = max(batches)
    return {str(b): min(n, max(MIN_PARITY_SUBSET, 4 * b)) for b in batches if b != top}


def cell_spec(c: Cell, art: ExportRecord, batches: tuple[int, ...], prep: Prepared, sel: Selection,
               settings: Settings, work: Path, tag: str, cache: Cache) -> CellSpec:
    inputs = "eval.npz" if is_multi(prep.ds.eval) else "eval.npy"  # several inputs: one array per name
    out_suffix = "npz" if is_multi(prep.ref) else "npy"
    return CellSpec(
        runner=c.runner, impl=RUNNERS[c.runner].impl, artifact=art.path, device=c.device or c.kind,
        precision=c.precision, format=c.fmt, threads=settings.threads if c.kind == "cpu" else None,
        batch_sizes=batches, model=dict(prep.model_spec), cache_dir=str(cache.root),
        runner_options=sel.options_for(c.runner).to_dict(), inputs=str(work / inputs),
        parity_inputs=str(work / inputs), outputs=str(work / f"{tag}-b{{batch}}.out.{out_suffix}"),
        parity_limit=_parity_limits(batches, count(prep.ds.eval), sel.parity_every_batch),
        loop=LoopSettings(warmup_iters=settings.warmup_iters, min_iters=settings.min_iters,
                          min_time_s=passes.share(settings.min_time_s, settings.passes) or 0.0,
                          max_time_s=passes.share(settings.max_time_s, settings.passes),
                          target_ci=settings.target_ci, warmup_time_s=settings.warmup_time_s or 0.0,
                          warmup_until_stable=c.kind in STABLE_WARMUP_KINDS),
        layout=_layout(prep), **_how_spec(settings))


def _layout(prep: Any) -> dict[str, Any]:
    """The model's batch axes, where any is not axis 0 (base/layout.py); {} otherwise."""
    lay = of_model_info(prep.minfo)
    return {} if lay.trivial() else lay.to_dict()


def _how_spec(settings: Settings) -> dict[str, Any]:
    """The CellSpec fields of the scenarios and the GPU timing policy."""
    return {"scenarios": tuple(settings.scenarios), "io": settings.io,
            "concurrency": int(settings.concurrency or 0)}


def chain_for(prep: Prepared, sel: Selection, settings: Settings, cache: Cache,
              prog: Progress) -> ArtifactChain:
    minfo = prep.minfo
    bs = settings.batch_sizes
    ctx = ExportContext(
        model=prep.model, model_name=minfo.name, input_shape=tuple(minfo.input_shape),
        num_classes=minfo.num_classes, calibration=prep.ds.calibration, model_spec=dict(prep.model_spec),
        max_batch=max(max(v) for v in bs.values()), preprocessing=dict(prep.preprocessing), log=prog.log,
        requested=dict(settings.requested), threads=settings.threads, cache_root=str(cache.root),
        batch_sizes={k: tuple(v) for k, v in bs.items()}, option_sets=dict(sel.runner_options),
        input_names=tuple(i["name"] for i in minfo.inputs),
        output_names=tuple(o["name"] for o in minfo.outputs), layout=_layout(prep))
    chain = ArtifactChain(ctx, cache, prep.source(), prog, export_timeout_s=sel.export_timeout_s)
    for key, rec in prep.carried.items():
        chain.carry(key, rec)
    for key, why in prep.unbuilt.items():
        chain.mark(key, why)
    return chain
