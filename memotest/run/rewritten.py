"""Files a target read and then wrote: whether the run left them as it found them.

A file the target read and then wrote (*rewritten*: a counter, a cache it refreshes, a
database opened read-write) is an input the run itself changed: its next run reads what
this one wrote. The result is reusable only when the file is as it was before the run,
which memotest can tell only if it fingerprinted the file then: it does so before each run
for the files the target's last record says it rewrote (:func:`snapshot`). So the first
run that rewrites a file is never reused; the next, if it leaves the file as it found it
(a cache written again with the same content), is, with the file as an input. A file whose
reader takes only a part of it (``memotest/inputs/readers.py``) counts as left as it was
when that part is, and only its reader read it. A file held by a reader that takes its
part whoever read it (a git index) is fingerprinted before every run whose last record
held it so: a run that only refreshes it (``git status``) is reusable at once.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import NamedTuple

from memotest.inputs.readers import UNPARSED, reader_for
from memotest.inputs.section import as_section, part_of
from memotest.model import Kind, Trace
from memotest.store import Record
from memotest.world.fingerprint import FileStates, Fingerprint


class Before(NamedTuple):
    """A file as it was before a run: its fingerprint, and for a file whose reader may take
    only a part of it, the digest of that part."""

    fp: Fingerprint
    part: str | None = None


def snapshot(
    record: Record | None, states: FileStates, cwd: str | None = None
) -> dict[str, Before]:
    """Before a run: the files the target's last run read and then wrote, so that
    :func:`memotest.recording.record.draft_record` can tell whether this run left them as they were;
    and the index of the git work tree ``cwd`` is in, which any ``git status`` of the
    run may refresh (a fresh clone's first run included)."""
    out: dict[str, Before] = {}
    paths = _rewritable(record) if record is not None else []
    index = git_index_of(cwd) if cwd else None
    if index is not None and index not in paths:
        paths.append(index)
    for path in paths:
        try:
            fp = states.fingerprint(path, fresh=True)
            out[path] = Before(fp, part_of(fp))
        except OSError:
            continue  # unreadable now: the run cannot be shown to leave it as it was
    return out


def git_index_of(cwd: str) -> str | None:
    """``.git/index`` of the work tree ``cwd`` is in (the nearest ``.git`` folder above it),
    or None."""
    folder = os.path.abspath(cwd)
    while True:
        index = os.path.join(folder, ".git", "index")
        if os.path.isdir(os.path.join(folder, ".git")):
            return index if os.path.isfile(index) else None
        parent = os.path.dirname(folder)
        if parent == folder:
            return None
        folder = parent


def _rewritable(record: Record) -> list[str]:
    """What the last run rewrote, and the files it held by a part whatever read them (a
    git index, which any ``git status`` may refresh: ``builtin/git_index.py``): a run
    that rewrites only what such a file's part leaves out is then reusable at once."""
    out = list(record.rewritten)
    for each in record.inputs:
        if Kind(each.kind) is Kind.SECTION:
            reader = reader_for(each.path)
            if reader is not None and not reader.callers and each.path not in out:
                out.append(each.path)
    return out


def rewritten_as_before(
    path: str, states: FileStates, before: Mapping[str, Before], trace: Trace
) -> Fingerprint | str:
    """A file the run read and then wrote: its fingerprint (an input) if it is as it was
    before the run (or, if only a reader that takes a part of it read it, that part is),
    else why the result may not be reused."""
    was = before.get(path)
    if was is None:
        return (
            f"{path} was read and then written by the target: its next run reads what "
            "this one wrote (if that run leaves it as it found it, the result is kept)"
        )
    try:
        now = states.fingerprint(path, fresh=True)
    except OSError as exc:
        return f"cannot fingerprint {path}: {exc.strerror or exc}"
    if (now.kind, now.digest) == (was.fp.kind, was.fp.digest):
        return now
    if was.part not in (None, UNPARSED):
        part = as_section(now, trace)
        if part is not None and part.digest == was.part:
            return part  # its reader takes only that part, and the run left it as it was
    return f"{path} was read and then changed by the target: its next run reads what this one wrote"
