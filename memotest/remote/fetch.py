"""Asking the remote for the targets that are stale locally, before the build runs them.

Local first, then remote: :func:`fetch` is called once per build with the verdicts of the
local check. Only targets that are stale there (not forced, not tagged ``no-cache``) ask
the remote, all at once in a small thread pool:

1. (threads) each one's manifest (its AC entry), the newest :data:`CANDIDATES` records it
   lists (each a CAS blob, checked against its sha256 and, with a key set, its signature),
   and the blobs their inputs name (put into the local CAS: a blob is checked against its
   local digest too);
2. (the build's thread) the first candidate whose every input holds on the local files,
   checked by each kind's own verifier with no stat signature, so every file is hashed;
3. (threads) the chosen records' logs and declared outputs, into the local CAS;
4. (the build's thread) each chosen record put into the local store (its blobs first), and
   the targets checked again by the local planner, exactly as a local record is: a target
   is a hit only if that check finds it fresh.

Nothing from the remote is trusted that the local check did not verify: the remote only
ever proposes a record, the local files decide. A record whose name, definition,
environment or recorder is not the target's, or whose outputs are not the target's
declared ones, is garbage. A remote that fails at any point yields no hit for the targets
it failed (:class:`~memotest.remote.cache.RemoteCache` counts and warns). The whole
fetch is one phase (:meth:`~memotest.remote.cache.RemoteCache.phase`): it ends within
``remote_timeout``, whatever the remote does, and Ctrl-C stops it at once.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from memotest.check.plan import Fresh, Stale
from memotest.drive.step import Step, Verdict
from memotest.inputs.registry import blob_kinds, verifiers
from memotest.model import Target
from memotest.remote import wire
from memotest.remote.cache import RemoteCache
from memotest.store import Store, StoreError, default_recorder
from memotest.store.records import named_blobs

#: How many of a manifest's records (the newest) are tried for one target.
CANDIDATES = 3

#: The local verdicts that do not ask the remote: the user wants the target run.
NOT_ASKED = ("forced", "no-cache")


def fetch(
    remote: RemoteCache,
    step: Step,
    store: Store,
    targets: Sequence[Target],
    verdicts: Mapping[str, Verdict],
) -> dict[str, Verdict]:
    """The new verdicts of the targets a record from the remote made fresh."""
    wanted = [
        t
        for t in targets
        if isinstance(v := verdicts.get(t.name), Stale) and v.kind not in NOT_ASKED
    ]
    if not wanted or remote.broken:
        return {}
    with remote.phase() as until:
        return _fetch(remote, step, store, wanted, until)


def _fetch(
    remote: RemoteCache, step: Step, store: Store, wanted: list[Target], until: float
) -> dict[str, Verdict]:
    recorder = default_recorder()
    kinds = blob_kinds()
    found = remote.map(
        lambda t: _candidates(remote, step, store, t, recorder, kinds), wanted, until
    )
    chosen: dict[str, wire.Travelled] = {}
    for target, candidates in zip(wanted, found, strict=True):
        for trav in candidates or ():
            if _holds(trav, step):
                chosen[target.name] = trav
                break
    if not chosen or remote.broken:
        return {}
    items = list(chosen.items())
    complete = remote.map(lambda kv: _fetch_rest(remote, store, kv[1]), items, until)
    if remote.broken:  # ran out of time: what came in part is not used
        return {}
    imported = []
    for (name, trav), ok in zip(items, complete, strict=True):
        if not ok:
            continue
        try:
            store.put(trav.record)
        except (StoreError, OSError) as exc:
            remote.warn(f"a record could not be stored locally: {exc}")
            continue
        imported.append(name)
    by_name = {t.name: t for t in wanted}
    again = step.check([by_name[n] for n in imported], store)
    hits = {n: v for n, v in again.items() if isinstance(v, Fresh)}
    remote.hits += len(hits)
    return hits


def _candidates(
    remote: RemoteCache,
    step: Step,
    store: Store,
    target: Target,
    recorder: str,
    kinds: tuple[str, ...],
) -> list[wire.Travelled]:
    """The records the remote lists for ``target``'s key, with their inputs' blobs."""
    key = step.key(target)
    ac = wire.ac_key(target.name, key, recorder)
    data = remote.call(lambda: remote.backend.get(f"ac/{ac}"), None)
    if data is None:
        return []
    entries = remote.call(lambda: wire.load_manifest(ac, data, remote.signer), [])
    out = []
    for entry in entries[:CANDIDATES]:

        def one(sha: str = entry["record"]) -> wire.Travelled | None:
            body = remote.get_blob(sha)
            if body is None:
                return None  # evicted from the server: a miss
            trav = wire.load_record(body, remote.signer, kinds, store.roots)
            rec = trav.record
            if (rec.name, rec.def_hash, rec.env_hash, rec.recorder) != (
                target.name,
                key.def_hash,
                key.env_hash,
                recorder,
            ):
                raise wire.Garbage(f"record {sha[:16]}... is not one of {target.name}'s key")
            if not set(rec.outputs) <= set(target.outputs):
                raise wire.Garbage(f"record {sha[:16]}... names outputs {target.name} does not")
            if rec.status != "passed" or not rec.cacheable:
                return None
            needed = set(named_blobs(rec.log_digest, rec.outputs, rec.tests_digest))
            needed |= trav.input_blobs
            if not needed <= set(trav.blobs):
                raise wire.Garbage(f"record {sha[:16]}... names a blob it does not ship")
            trav.blobs = {d: trav.blobs[d] for d in needed}
            for digest in sorted(trav.input_blobs):
                if not remote.fetch_to(store, digest, trav.blobs[digest]):
                    return None
            return trav

        trav = remote.call(one, None)
        if trav is not None:
            out.append(trav)
    return out


def _holds(trav: wire.Travelled, step: Step) -> bool:
    """Whether every input of a travelled record holds on this machine's files (no stat
    signature: each kind's verifier hashes)."""
    verify = verifiers()
    for inp in trav.record.inputs:
        check = verify.get(inp.kind.value)
        if check is None:
            return False
        try:
            verdict = check(step.states, inp.path, inp.digest, None, 0, getattr(inp, "link", None))
        except (OSError, ValueError, StoreError):
            return False
        if verdict is False:
            return False
    return True


def _fetch_rest(remote: RemoteCache, store: Store, trav: wire.Travelled) -> bool:
    """The chosen record's log and declared outputs, into the local CAS."""

    def rest() -> bool:
        for digest, sha in sorted(trav.blobs.items()):
            if digest not in trav.input_blobs and not remote.fetch_to(store, digest, sha):
                return False
        return True

    return remote.call(rest, False)
