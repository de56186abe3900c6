"""The targets' durations on the remote, for ``--shard`` on machines with empty stores.

A CI job starts with an empty ``.memotest/``, so ``--shard`` would have no durations to
balance by (:mod:`memotest.loop.shard`). Every build that may write the remote therefore
merges the durations of the targets it ran into one AC entry per targets file (keyed by
the file's portable path, ``@project/memotest.toml``, so every clone shares it), and a
sharded build reads it for the targets its local store has not recorded.

Only the balance depends on it, never what is replayed: garbage, a missing entry or a
remote that is down give no durations (the split is then by count), and a lost race
between two uploads loses some durations. Signed and checked like a record when
``MEMOTEST_REMOTE_KEY`` is set (a forged entry could only unbalance the shards, but an
unsigned one from an untrusted job should not even do that).
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Mapping

from memotest.remote import wire
from memotest.remote.cache import RemoteCache

FORMAT = "durations/1"
#: At most this many targets are kept (the most recently run first).
LIMIT = 20_000


def durations_key(targets_file: str) -> str:
    """The AC key of the durations of the targets of ``targets_file`` (its portable path)."""
    return wire.sha256(os.fsencode(f"{FORMAT}\0{targets_file}"))  # a path: its bytes


def _parse(key: str, data: bytes, signer: wire.Signer) -> dict[str, float]:
    text = wire.unseal(data, FORMAT, signer, f"{FORMAT}/{key}")  # Garbage, Untrusted
    try:
        raw = json.loads(text)
    except ValueError:
        raise wire.Garbage("the shards' durations do not parse") from None
    if not isinstance(raw, dict):
        raise wire.Garbage("the shards' durations do not parse")
    return {
        str(name): float(secs)
        for name, secs in raw.items()
        if isinstance(secs, (int, float)) and math.isfinite(secs) and secs >= 0
    }


def fetch_durations(remote: RemoteCache, targets_file: str) -> dict[str, float]:
    """The durations the remote holds for ``targets_file``'s targets (empty on any fault)."""
    key = durations_key(targets_file)
    with remote.phase() as until:  # a phase of its own, before the build
        data = remote.run(lambda: remote.backend.get(f"ac/{key}"), None, until)
    if data is None:
        return {}
    return remote.call(lambda: _parse(key, data, remote.signer), {})


def publish_durations(remote: RemoteCache, targets_file: str, ran: Mapping[str, float]) -> None:
    """Merge the durations of the targets this build ran into the remote's entry."""
    if remote.read_only or remote.broken or not ran:
        return
    key = durations_key(targets_file)

    def merge() -> None:
        old = remote.backend.get(f"ac/{key}")
        merged: dict[str, float] = {}
        if old is not None:
            try:
                merged = _parse(key, old, remote.signer)
            except (wire.Garbage, wire.Untrusted):
                merged = {}  # replaced by this build's
        for name in ran:
            merged.pop(name, None)
        merged.update({n: round(s, 3) for n, s in ran.items()})  # the newest last
        kept = dict(list(merged.items())[-LIMIT:])
        text = json.dumps(kept).encode()
        remote.backend.put(f"ac/{key}", wire.seal(FORMAT, text, remote.signer, f"{FORMAT}/{key}"))

    until = remote.backend.deadline or time.monotonic() + remote.timeout
    remote.run(merge, None, until)
