"""How the A/B gate pairs its two sides (measure/ab.py): the pairs of blocks, the process pairs, the time per
side, and what each process is given before its first load."""

from __future__ import annotations

import math
from dataclasses import dataclass

# the A/B gate's default measuring time for all its process pairs (--budget): a gate of 3 rows on the 2-core
# VM took 10-20 s; one of 18 rows 81 s on a slow stretch, at 9 process pairs a row (benchmarks/results)
GATE_BUDGET_S = 300.0


@dataclass(frozen=True)
class PairPlan:
    pairs: int = 30  # pairs of blocks per row, over all process pairs
    replicates: int = 5  # process pairs per configuration, one after the other (1: one pair, as before 0.x)
    # at most this many process pairs where the first ``replicates`` show a row too noisy for the gate's goal
    # (the number is decided once, from their spread alone: never from the change they show; 10 until the
    # goal was planned for the whole gate: 18 rows of unchanged LeNet-5 at 9 process pairs each were not
    # judged in 17 of 20 runs on a slow stretch of the 2-core VM)
    max_replicates: int = 30
    # seconds the process pairs may take, the planned ones always measured (0: no bound): the gate's (its
    # --budget) as given to it, which it shares among its configurations (regress/ab_needs.py ``Budget``);
    # one configuration's as measure_pair gets it
    budget_s: float = 0.0
    # each side's timed calls per row, in seconds, split into blocks (0.6 until the malloc fix: with process
    # pairs' lasting differences gone, a MobileNet v2 gate on the 2-core VM printed detectable changes of
    # 6.9-7.6 % a row (medians of 20 rounds); shorter blocks cost the gate less, PyTorch's (3 calls) held)
    side_time_s: float = 0.4
    # each process's warm-up after its load (besides the run's --warmup calls): short, as every process pair
    # warms up again, and what warm-up leaves falls on both sides alike (0.05 until the malloc fix)
    warmup_s: float = 0.02
    seed: int = 0  # the draw of which side goes first in each pair
    timeout_s: float = 300.0  # any one answer of a child (a load, a block, parity)
    # the waiting side is stopped (SIGSTOP to its process group) while the other side is timed, and continued
    # (SIGCONT) for its own block: a runtime's threads spin after a call for a while (ONNX Runtime's pool took
    # 0.59 cores of the other side's blocks on the 2-core VM); stopped, they take none
    freeze: bool = True
    # each side's calling thread pinned to one CPU, the same for both, while its blocks are timed
    # (ab_child._Pin: a shared VM's virtual CPUs run at speeds of their own); runtimes' threads keep theirs
    pin: bool = True
    # glibc's malloc thresholds fixed in both sides' processes before their first load (host/malloc.py: by
    # default they move with each process's history: PyTorch's MobileNet v2 processes on the 2-core VM ran
    # 16 % apart for life by it); only where both sides' infer-compare can (their greetings say), else neither
    malloc: bool = True
    # calls each side times in one process pair that a tail rule needs (p99: ten calls beyond it,
    # regress/tails.py ``calls_for``), within ``tail_time_s`` seconds per side and row over all process pairs
    # (longer blocks than --side-time gives: a p99 of 60 calls is not judged)
    tail_calls: int = 0
    tail_time_s: float = 20.0

    @property
    def per_replicate(self) -> int:
        """Pairs of blocks timed by each process pair: as many of either order (its median then takes one of
        each in the middle), at least one of each."""
        return max(2, 2 * round(self.pairs / max(1, self.replicates) / 2))

    def tail_calls_per_block(self, per: int, call_s: float) -> int:
        """Calls per block that give a process pair ``tail_calls`` calls a side, as far as ``tail_time_s``
        allows at ``call_s`` seconds a call (0: no tail rule)."""
        if self.tail_calls <= 0:
            return 0
        most = self.tail_time_s / max(1, self.replicates) / max(call_s, 1e-9)
        return max(1, math.ceil(min(self.tail_calls, most) / max(1, per)))
