"""Writing ``memotest-sh``'s stamps (:mod:`memotest_make.stamp` reads them): after the
full check replayed a line, from its record, verified again."""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from pathlib import Path

from memotest import faults
from memotest.config import Project, Settings
from memotest.fingerprint import Fingerprint
from memotest.inputs.check import check
from memotest.inputs.order import split_order
from memotest.memo import MemoResult
from memotest.model import Kind, Target
from memotest.observe import file_states
from memotest.roots import of as roots_of
from memotest.store import Record, Store, StoreError
from memotest_make import stamp


def stamp_replay(
    root: Path,
    target: Target,
    settings: Settings,
    result: MemoResult,
    context: str,
    default_patterns: Sequence[str],
) -> None:
    """After the full check replayed a line: its stamp, for the fast path to replay next
    (:mod:`memotest_make.stamp` says why it is sound). Signatures first, then every input
    verified again by its kind's checker; any doubt leaves no stamp."""
    path = stamp.stamp_path(str(root), target.name)
    stamp.remove(path)
    rec = result.record
    if rec is None or rec.variant_id is None or rec.outputs or rec.tests_digest:
        return
    try:
        _write(path, root, target, settings, rec, context, default_patterns, result.log)
    except Exception as exc:  # a stamp is an optimisation: never a failure of the line
        faults.log(root, f"stamping {target.name}", exc)


def stamp_run(
    root: Path,
    target: Target,
    settings: Settings,
    result: MemoResult,
    context: str,
    default_patterns: Sequence[str],
) -> None:
    """After a line ran, passed and was recorded: the stamp of that record, so that the
    next ``make`` replays it by the fast path already. The newest record of the line's
    name is that one only if its key is the one this run was recorded under (another make
    with another environment may have recorded the same line meanwhile): else no stamp."""
    path = stamp.stamp_path(str(root), target.name)
    stamp.remove(path)
    try:
        with Store.open(root, lock=False, roots=roots_of(root, settings.roots)) as store:
            rec = store.get(target.name)
            if rec is None or rec.variant_id is None or rec.outputs or rec.tests_digest:
                return
            if result.key_hashes is None or (rec.def_hash, rec.env_hash) != result.key_hashes:
                return
            if rec.status != "passed" or not rec.cacheable:
                return
            log = store.read_blob(rec.log_digest) if rec.log_digest else b""
        _write(path, root, target, settings, rec, context, default_patterns, log)
    except Exception as exc:  # a stamp is an optimisation: never a failure of the line
        faults.log(root, f"stamping {target.name}", exc)


def _write(
    path: str,
    root: Path,
    target: Target,
    settings: Settings,
    rec: Record,
    context: str,
    default_patterns: Sequence[str],
    log: bytes,
) -> None:
    """The stamp of ``rec`` at ``path``, unless its inputs no longer verify."""
    assert rec.variant_id is not None
    header = verified_header(root, target, settings, rec.variant_id, time.time_ns())
    if header is None:
        return
    header.update(
        context=context,
        default_patterns=list(default_patterns),
        exit_code=rec.exit_code,
        duration=rec.duration,
    )
    stamp.write(path, header, log)


def verified_header(
    root: Path, target: Target, settings: Settings, variant_id: int, taken_ns: int
) -> dict[str, object] | None:
    try:
        with Store.open(root, lock=False) as store:
            rec = store.variants([variant_id]).get(variant_id)
            if rec is None:
                return None
            inputs = list(rec.inputs)
            if any(Kind(fp.kind).value not in stamp.STAMPABLE_KINDS for fp in inputs):
                return None
            paths = stamp.signatures([fp.path for fp in inputs], taken_ns, content_held(inputs))
            if paths is None:
                return None
            orders = []
            for fp in inputs:
                if Kind(fp.kind) is Kind.ORDER:
                    recorded = split_order(store.read_blob(fp.digest))
                    local = [store.roots.local(os.fsdecode(p)) for p in recorded.paths]
                    orders.append([recorded.marks.decode(), local])
            project = Project(root / "memotest.toml", root, settings, {target.name: target})
            states = file_states(project)
            states.blobs = store.read_blob
            states.local = store.roots.local
            late = [fp for fp in inputs if Kind(fp.kind) is Kind.ORDER]
            for fp in [*(fp for fp in inputs if Kind(fp.kind) is not Kind.ORDER), *late]:
                if check(states, fp) is False:
                    return None
    except (StoreError, OSError):
        return None
    return {"name": target.name, "paths": paths, "orders": orders}


def content_held(inputs: list[Fingerprint]) -> dict[str, list[str]]:
    """The paths whose every input is a ``file`` one (or an effect's file) read through
    no link: held by content, mode and link count alone, with those digests."""
    kinds: dict[str, set[str]] = {}
    digests: dict[str, list[str]] = {}
    for fp in inputs:
        kind = Kind(fp.kind).value
        digest = fp.digest
        if kind == "effect" and digest.startswith("file:"):
            kind = "file"
        kinds.setdefault(fp.path, set()).add(kind)
        if kind == "file" and getattr(fp, "link", None) is None:
            digests.setdefault(fp.path, []).append(digest)
    return {p: d for p, d in digests.items() if kinds[p] == {"file"}}
