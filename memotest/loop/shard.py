"""``--shard I/N``: a deterministic share of a build's targets for one of N CI jobs.

Every selected target is *assigned* to exactly one shard; a shard runs the targets assigned
to it and everything they need (a ``needs`` target assigned to another shard runs in each
shard that needs it, so ``needs`` keep their order within a shard and no shard waits for
another). With a remote cache the later shards usually replay such a shared target.

The split balances the shards by the durations the store recorded (the newest record of
each target): the longest targets first, each to the shard with the least work so far
(Graham's LPT rule, within 4/3 of the best split). A target with no recorded duration
counts as the median of the known ones (1 s when none is known), so new targets spread
evenly. Ties are broken by name, so the same targets and durations always give the same
split on every machine.

The split is exact only when every shard sees the same durations: jobs that start from
the same store do. A job that started late, after another shard uploaded new records to a
shared remote, may see others; the CI page (``docs/ci.md``) therefore ends a sharded
pipeline with one unsharded ``memotest build`` that replays what the shards recorded and
runs whatever no shard ran.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from memotest.errors import UsageError
from memotest.model import Target

__all__ = ["Shard", "ShardPlan", "parse_shard", "plan_shards"]

#: What a target with no recorded duration counts as when no duration at all is known.
DEFAULT_SECONDS = 1.0


@dataclass(frozen=True)
class Shard:
    """Shard ``index`` (1-based) of ``count``."""

    index: int
    count: int

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


@dataclass
class ShardPlan:
    """What one shard runs. ``assigned``: the targets assigned to it; ``needed``: the
    targets assigned to other shards that its targets need; ``estimate``/``total``: the
    estimated seconds of its assigned targets and of all of them."""

    shard: Shard
    assigned: list[str] = field(default_factory=list)
    needed: list[str] = field(default_factory=list)
    estimate: float = 0.0
    total: float = 0.0
    selected: int = 0

    def as_json(self) -> dict[str, object]:
        return {
            "index": self.shard.index,
            "count": self.shard.count,
            "assigned": self.assigned,
            "needed": self.needed,
            "estimate": round(self.estimate, 3),
            "total": round(self.total, 3),
            "selected": self.selected,
        }


#: The most shards a build may be split in (more CI jobs than any pipeline runs).
MAX_SHARDS = 10_000

_SHARD_RE = re.compile(r"([0-9]{1,9})/([0-9]{1,9})")


def parse_shard(text: str) -> Shard:
    """``"I/N"`` as a :class:`Shard`; a :class:`UsageError` saying what is wrong otherwise.
    Only ASCII digits (not ``int``'s spaces, ``_`` or other scripts' digits), and
    ``1 <= I <= N <= MAX_SHARDS``."""
    m = _SHARD_RE.fullmatch(text)
    index, count = (int(m.group(1)), int(m.group(2))) if m else (0, 0)
    if not 1 <= index <= count <= MAX_SHARDS:
        raise UsageError(
            f"--shard: expected I/N with 1 <= I <= N <= {MAX_SHARDS} (e.g. --shard 2/4), "
            f"not {text!r}"
        )
    return Shard(index, count)


def _weights(names: Iterable[str], durations: Mapping[str, float | None]) -> dict[str, float]:
    """Each name's weight: its duration in milliseconds (as the remote keeps them, so that a
    store's durations and the remote's split alike), or the median of the known ones."""
    names = list(names)
    known = {n: round(d, 3) for n in names if (d := durations.get(n)) is not None and d >= 0}
    import statistics  # here: every build imports this module, few shard

    fallback = statistics.median(known.values()) if known else DEFAULT_SECONDS
    return {n: known.get(n, fallback) for n in names}


def assign(
    names: Iterable[str], durations: Mapping[str, float | None], count: int
) -> list[list[str]]:
    """The names split into ``count`` lists of about equal total duration (deterministic).
    Past one shard per name the rest are empty: only that many are weighed (the split
    is the same), so the work is bounded by the names, whatever ``count`` is."""
    weights = _weights(names, durations)
    used = max(1, min(count, len(weights)))
    loads = [0.0] * used
    shards: list[list[str]] = [[] for _ in range(used)]
    for name in sorted(weights, key=lambda n: (-weights[n], n)):
        i = min(range(used), key=lambda k: (loads[k], k))
        shards[i].append(name)
        loads[i] += weights[name]
    return shards


def plan_shards(
    targets: list[Target], durations: Mapping[str, float | None], shard: Shard
) -> tuple[list[Target], ShardPlan]:
    """The targets shard ``shard`` runs (in the given order) and what it says of them."""
    by_name = {t.name: t for t in targets}
    weights = _weights(by_name, durations)
    shards = assign(by_name, durations, shard.count)
    mine = set(shards[shard.index - 1]) if shard.index <= len(shards) else set()
    wanted = set(mine)
    stack = list(mine)
    while stack:
        for need in by_name[stack.pop()].needs:
            if need in by_name and need not in wanted:
                wanted.add(need)
                stack.append(need)
    order = [t for t in targets if t.name in wanted]
    plan = ShardPlan(
        shard=shard,
        assigned=[t.name for t in order if t.name in mine],
        needed=[t.name for t in order if t.name not in mine],
        estimate=sum(weights[n] for n in mine),
        total=sum(weights.values()),
        selected=len(targets),
    )
    return order, plan
