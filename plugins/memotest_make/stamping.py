"""Writing ``memotest-sh``'s stamps (:mod:`memotest_make.stamp` says what they are; the
front, ``front/front.c``, reads them): after the full check replayed a line, or a line
ran, passed and was recorded, from its record, verified again."""

from __future__ import annotations

import os
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from memotest.drive import faults
from memotest.inputs.check import check
from memotest.inputs.order import split_order
from memotest.load.config import Project, Settings
from memotest.memo import MemoResult
from memotest.model import Kind, Target
from memotest.run.observe import file_states
from memotest.store import Record, Store, StoreError
from memotest.world.fingerprint import Fingerprint
from memotest.world.roots import of as roots_of
from memotest_make import stamp
from memotest_make.makeflags import override_names


@dataclass(frozen=True)
class Front:
    """What the front passed: its context and where the line's stamp goes."""

    context: str
    path: str
    #: The patterns the line's variables are keyed by (``pass_env``, ``--pass-env``).
    patterns: tuple[str, ...]
    environ: Mapping[str, str]
    #: The make target, as the messages name it.
    label: str = ""
    #: The files the line's last run left behind (gone: the line runs).
    outputs: tuple[str, ...] = ()
    quiet: bool = False


def stamp_replay(
    root: Path, target: Target, settings: Settings, result: MemoResult, front: Front
) -> None:
    """After the full check replayed a line: its stamp, for the front to replay next.
    Signatures first, then every input verified again by its kind's checker; any doubt
    leaves no stamp."""
    stamp.remove(front.path)
    rec = result.record
    if rec is None or rec.variant_id is None or rec.outputs or rec.tests_digest:
        return
    try:
        _write(root, target, settings, rec, front, result.log)
    except Exception as exc:  # a stamp is an optimisation: never a failure of the line
        faults.log(root, f"stamping {target.name}", exc)


def stamp_run(
    root: Path, target: Target, settings: Settings, result: MemoResult, front: Front
) -> None:
    """After a line ran, passed and was recorded: the stamp of that record, so that the
    next ``make`` replays it by the front already. The newest record of the line's name is
    that one only if its key is the one this run was recorded under (another make with
    another environment may have recorded the same line meanwhile): else no stamp."""
    stamp.remove(front.path)
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
        _write(root, target, settings, rec, front, log)
    except Exception as exc:  # a stamp is an optimisation: never a failure of the line
        faults.log(root, f"stamping {target.name}", exc)


def _write(
    root: Path, target: Target, settings: Settings, rec: Record, front: Front, log: bytes
) -> None:
    """The stamp of ``rec`` at ``front.path``, unless its inputs no longer verify."""
    assert rec.variant_id is not None
    watched = stamp.watched_environ(
        [*front.patterns, *override_names(front.environ.get("MAKEFLAGS", ""))], front.environ
    )
    if watched is None:
        return
    verified = verified_paths(root, target, settings, rec.variant_id, time.time_ns())
    if verified is None:
        return
    paths, orders = verified
    sources = stamp.path_entries(stamp.key_sources(), time.time_ns())
    if sources is None:
        return
    message = ""
    if not front.quiet:
        message = (
            f"[memotest] {front.label}: up to date, replayed "
            f"(the recorded run took {rec.duration:.2f}s)\n"
        )
    data = stamp.render(
        context=front.context,
        patterns=watched[0],
        entries=watched[1],
        fds=jobserver_fds(front.environ),
        paths=[*paths, *sources, *(("E", p, "") for p in front.outputs)],
        orders=orders,
        message=message,
        exit_code=rec.exit_code if rec.exit_code is not None else 0,
        log=log,
    )
    stamp.write(front.path, data)


def jobserver_fds(environ: Mapping[str, str]) -> list[int]:
    """The jobserver's descriptor named in MAKEFLAGS (closed now: had make passed it, the
    line would have run plainly, :func:`memotest_make.makeflags.jobserver_passed`)."""
    m = re.search(r"--jobserver-(?:auth|fds)=(\d+),(\d+)", environ.get("MAKEFLAGS", ""))
    return [int(m.group(1))] if m else []


def verified_paths(
    root: Path, target: Target, settings: Settings, variant_id: int, taken_ns: int
) -> tuple[list[tuple[str, str, str]], list[tuple[str, list[str]]]] | None:
    """The path entries of the record's inputs, taken at ``taken_ns``, and its mtime
    orders, when every input is of a stampable kind and verifies after that; else None."""
    try:
        with Store.open(root, lock=False) as store:
            rec = store.variants([variant_id]).get(variant_id)
            if rec is None:
                return None
            inputs = list(rec.inputs)
            if any(Kind(fp.kind).value not in stamp.STAMPABLE_KINDS for fp in inputs):
                return None
            contents = {}
            for path, digests in content_held(inputs).items():
                read = stamp.content(path, digests)
                if read is not None:
                    contents[path] = read
            paths = stamp.path_entries([fp.path for fp in inputs], taken_ns, contents)
            if paths is None:
                return None
            orders = []
            for fp in inputs:
                if Kind(fp.kind) is Kind.ORDER:
                    recorded = split_order(store.read_blob(fp.digest))
                    local = [store.roots.local(os.fsdecode(p)) for p in recorded.paths]
                    orders.append((recorded.marks.decode(), local))
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
    return paths, orders


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
