"""``build --audit F``: run again a random share of the targets the cache would replay.

The soundness check in the field: a target whose recorded observations all hold is run
anyway and its result compared with the cached one. A different status or exit code is a
*memoization error* (an input memotest did not see), which fails the build. The seed of
the random choice is printed, so that an audit can be reproduced.
"""

from __future__ import annotations

import math
import random

from memotest.check.plan import Fresh, Stale
from memotest.reporting.report import Summary, TargetResult
from memotest.store import Record


class Audit:
    """Which targets to audit, and how their re-runs compare with the cache."""

    def __init__(self, fraction: float, seed: int | None) -> None:
        self.fraction = fraction  # 0: no audit
        self.seed = seed
        #: The audited targets, each with the record the cache would have replayed.
        self.cached: dict[str, Record] = {}

    def choose(self, verdicts: dict[str, Fresh | Stale], summary: Summary) -> None:
        """A random share of the fresh targets becomes stale, to run again and compare."""
        if self.fraction <= 0:
            return
        fresh = sorted(n for n, v in verdicts.items() if isinstance(v, Fresh))
        seed = self.seed
        if seed is None:
            seed = random.SystemRandom().randrange(1 << 31)
        k = min(len(fresh), math.ceil(self.fraction * len(fresh)))
        chosen = random.Random(seed).sample(fresh, k)
        summary.audit = {"seed": seed, "audited": sorted(chosen), "errors": []}
        for name in chosen:
            rec = verdicts[name].record  # type: ignore[union-attr]
            self.cached[name] = rec
            verdicts[name] = Stale("forced", "audit: re-run to compare with the cache", record=rec)

    def compare(self, result: TargetResult, summary: Summary) -> None:
        """For an audited target's run: the same result as the cache, or an error."""
        cached = self.cached.get(result.name)
        if cached is None:
            return
        if (result.status, result.exit_code) == (cached.status, cached.exit_code):
            result.reason = "audit: re-ran, same result as the cache"
            return
        error = (
            f"{result.name} was cached as {cached.status} (exit code {cached.exit_code}) "
            f"but {result.status} (exit code {result.exit_code}) when re-run"
        )
        result.reason = f"memoization error: {error}"
        summary.audit["errors"].append(error)
