"""The Ray executor: each job is one Ray task placed by custom resources of capacity 1 (so no two
timed tasks share a device), never retried (``max_retries=0``: a retry would re-measure under other
conditions). A node on the driver's host reads the driver's bundle directory; other nodes get the bundle
shipped once through the object store (packed only if one needs it); either way the node checks the manifest's
sha256 and every file against it (fleet/pack.py).
A task that fails, whose node dies, or that runs past ``timeout_s`` leaves an error naming the node;
Ctrl-C cancels what still runs and returns what came back. ``untrusted``: every node answers in JSON bytes,
which the driver reads as data and checks, never unpickling anything a node returns (fleet/channel.py)."""

from __future__ import annotations

import socket
import time
from collections.abc import Sequence
from pathlib import Path

from infer_compare.base.records import Report
from infer_compare.fleet.channel import Lost, Refused, read_answer
from infer_compare.fleet.executor import Event, Job, JobResult
from infer_compare.fleet.pack import manifest_sha256, pack
from infer_compare.fleet.task import run_on_node, run_on_node_data


class RayExecutor:
    def __init__(self, timeout_s: float = 3600.0, poll_s: float = 1.0, heartbeat_s: float = 15.0,
                 untrusted: bool = False):
        self.timeout_s, self.poll_s, self.heartbeat_s = timeout_s, poll_s, heartbeat_s
        self.untrusted = untrusted
        self._shipped: set[int] = set()  # jobs sent the archive: "absent" from them is not an answer

    def _submit(self, ray, job: Job, ship: _Shipment, here: bool):
        """The job's task: with the driver's bundle directory (a node on this host) or the shipped bundle."""
        fn = run_on_node_data if self.untrusted else run_on_node
        task = ray.remote(max_retries=0, num_cpus=0)(fn).options(
            resources=dict(job.resources), num_gpus=job.gpus, name=f"infer-compare:{job.target}")
        if here:
            return task.remote(None, ship.sha, job, ship.path)
        self._shipped.add(id(job))
        ref, sha = ship.ref()
        return task.remote(ref, sha, job)

    def run(self, bundle: str, jobs: Sequence[Job], on_event: Event) -> list[JobResult]:
        import ray

        ship, host = _Shipment(ray, bundle), socket.gethostname()
        refs = {self._submit(ray, j, ship, bool(j.host) and j.host == host): j for j in jobs}
        for j in jobs:
            on_event(j.label, f"submitted ({', '.join(sorted(j.resources))})")
        done: dict[Job, JobResult] = {}
        t0 = time.perf_counter()
        try:
            self._wait(ray, refs, done, on_event, t0, lambda j: self._submit(ray, j, ship, False))
        except KeyboardInterrupt:
            self._cancel(ray, refs, done, "cancelled by Ctrl-C before it finished", on_event)
        return [done[j] for j in jobs]

    def _wait(self, ray, refs: dict, done: dict, on_event: Event, t0: float, reship) -> None:
        """Until every job has a result; a job whose node did not find the driver's bundle directory is
        submitted again with the bundle shipped (``reship``): nothing was measured yet."""
        pending, last_beat = list(refs), t0
        while pending:
            ready, pending = ray.wait(pending, num_returns=1, timeout=self.poll_s,
                                      **({"fetch_local": False} if self.untrusted else {}))
            for ref in ready:
                res = self._collect(ray, ref, refs[ref], time.perf_counter() - t0)
                if res is None:
                    job = refs.pop(ref)
                    refs[reship(job)] = job
                    pending.append(next(reversed(refs)))
                    on_event(job.label, "the driver's bundle directory is not on this node: shipped")
                    continue
                done[refs[ref]] = res
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

    def _collect(self, ray, ref, job: Job, elapsed: float) -> JobResult | None:
        """The job's result; None where its node did not find the driver's bundle directory (once: a node that
        says so of the bundle it was shipped is refused)."""
        try:
            out, checked = self._answer(ray, ref, job)
        except Refused as e:
            return JobResult(job, error=str(e), elapsed_s=elapsed)
        facts = out.get("node") or {}
        if "absent" in out:
            if id(job) not in self._shipped:
                return None
            return JobResult(job, error=f"answer refused: node {job.label} said the bundle was absent after "
                             "it was shipped", node=facts, elapsed_s=elapsed)
        if "error" in out:
            return JobResult(job, error=f"node {job.label}: {out['error']}", node=facts, elapsed_s=elapsed)
        return JobResult(job, out["report"], node=facts, elapsed_s=elapsed, checked=checked)

    def _answer(self, ray, ref, job: Job) -> tuple[dict, Report | None]:
        """(the node's answer, its report checked against the results schema or None); ``Refused``, one line
        naming the node, otherwise. Untrusted: read as data (fleet/channel.py); else what ``ray.get``
        unpickles."""
        where = f"node {job.label}"
        if self.untrusted:
            try:
                return read_answer(ray, ref, where)
            except Lost:
                raise
            except Refused as e:
                raise Refused(f"answer refused: {e}") from None
        try:
            out = ray.get(ref)
        except Exception as e:  # noqa: BLE001 - node died, worker crashed, task cancelled
            text = str(e).strip()
            why = text.splitlines()[0].split(". ")[0] if text else ""
            raise Refused(f"{where}: {type(e).__name__}: {why}"[:400]) from None
        if not isinstance(out, dict):
            raise Refused(f"answer refused: {where} returned an object of type {type(out).__name__}, not an "
                          "answer")
        return out, None  # its report is checked when the node's report is made (fleet/run.py)

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


class _Shipment:
    """The bundle for the nodes: its directory and manifest's sha256 (a node on the driver's host), and the
    archive in the object store, packed and put once, when a node first needs it."""

    def __init__(self, ray, bundle: str):
        self.ray, self.path, self.sha = ray, str(Path(bundle).resolve()), manifest_sha256(bundle)
        self._ref: tuple | None = None

    def ref(self) -> tuple:
        """(object ref of the archive, the sha256 of the manifest in it)."""
        if self._ref is None:
            data, sha = pack(self.path)
            self._ref = (self.ray.put(data), sha)
        return self._ref
