"""The Ray executor: each job is one Ray task placed by custom resources of capacity 1 (so no two
timed tasks share a device), never retried (``max_retries=0``: a retry would re-measure under other
conditions), the bundle shipped once through the object store and its sha256 checked on arrival.
A task that fails, whose node dies, or that runs past ``timeout_s`` leaves an error naming the node;
Ctrl-C cancels what still runs and returns what came back."""

from __future__ import annotations

import time
from collections.abc import Sequence

from infer_compare.fleet.executor import Event, Job, JobResult
from infer_compare.fleet.pack import pack
from infer_compare.fleet.task import run_on_node


class RayExecutor:
    def __init__(self, timeout_s: float = 3600.0, poll_s: float = 1.0, heartbeat_s: float = 15.0):
        self.timeout_s, self.poll_s, self.heartbeat_s = timeout_s, poll_s, heartbeat_s

    def _submit(self, ray, blob_ref, sha: str, jobs: Sequence[Job]) -> dict:
        task = ray.remote(max_retries=0, num_cpus=0)(run_on_node)
        return {task.options(resources=dict(j.resources), num_gpus=j.gpus,
                             name=f"infer-compare:{j.target}").remote(blob_ref, sha, j): j for j in jobs}

    def run(self, bundle: str, jobs: Sequence[Job], on_event: Event) -> list[JobResult]:
        import ray

        data, sha = pack(bundle)
        refs = self._submit(ray, ray.put(data), sha, jobs)
        for j in jobs:
            on_event(j.label, f"submitted ({', '.join(sorted(j.resources))})")
        done: dict[Job, JobResult] = {}
        t0 = time.perf_counter()
        try:
            self._wait(ray, refs, done, on_event, t0)
        except KeyboardInterrupt:
            self._cancel(ray, refs, done, "cancelled by Ctrl-C before it finished", on_event)
        return [done[j] for j in jobs]

    def _wait(self, ray, refs: dict, done: dict, on_event: Event, t0: float) -> None:
        pending, last_beat = list(refs), t0
        while pending:
            ready, pending = ray.wait(pending, num_returns=1, timeout=self.poll_s)
            for ref in ready:
                done[refs[ref]] = self._collect(ray, ref, refs[ref], time.perf_counter() - t0)
                on_event(refs[ref].label, done[refs[ref]].error or "done")
            now = time.perf_counter()
            if pending and now - t0 > self.timeout_s:
                self._cancel(ray, {r: refs[r] for r in pending}, done,
                             f"no result after {self.timeout_s:g} s (hung or lost); cancelled", on_event)
                return
            if pending and now - last_beat >= self.heartbeat_s:
                last_beat = now
                for r in pending:
                    on_event(refs[r].label, f"still measuring ({now - t0:.0f} s)")

    @staticmethod
    def _collect(ray, ref, job: Job, elapsed: float) -> JobResult:
        try:
            out = ray.get(ref)
        except Exception as e:  # noqa: BLE001 - node died, worker crashed, task cancelled
            text = str(e).strip()
            why = text.splitlines()[0].split(". ")[0] if text else ""
            return JobResult(job, error=f"node {job.label}: {type(e).__name__}: {why}"[:400], elapsed_s=elapsed)
        if "error" in out:
            return JobResult(job, error=f"node {job.label}: {out['error']}", node=out.get("node", {}),
                             elapsed_s=elapsed)
        return JobResult(job, out["report"], node=out.get("node", {}), elapsed_s=elapsed)

    @staticmethod
    def _cancel(ray, refs: dict, done: dict, why: str, on_event: Event) -> None:
        for ref, job in refs.items():
            if job in done:
                continue
            try:
                ray.cancel(ref, force=True)
            except Exception:  # noqa: BLE001 - already gone
                pass
            done[job] = JobResult(job, error=f"node {job.label}: {why}")
            on_event(job.label, why)
