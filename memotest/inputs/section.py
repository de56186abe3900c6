"""``section``: a file, by the part of it that its reader takes (``readers.py``).

A run forked from a warm worker reports the files that only their readers opened, in its
own process and its worker (``Trace.sections``: its audit hook checks every ``open``
against the readers' callers, ``readers.worker_table``). The refinement turns such a
``file`` input, when no other process read the file and it is no symlink, into a
``section`` input whose digest is its reader's digest of the part (``entry-points:...``,
``gzip:...``): what the digest starts with, the reader's name, says which part it holds
by. A reader with no callers does so for its files whoever read them. A file memotest
cannot parse as its reader would, or that changed since it was fingerprinted, stays
whole.

It holds while the stat signature is the recorded one, or else while the part its
reader takes is as it was; a file that no longer parses, or whose part changed in any
way, runs the target again.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Sequence
from typing import TYPE_CHECKING

import xxhash

from memotest.inputs.base import InputKind, read_file, refresh, regular_file, sig_holds, type_word
from memotest.inputs.readers import UNPARSED, digest_of, reader_for
from memotest.model import Input, Kind, Trace
from memotest.world.fingerprint import FileStates, Fingerprint, Refresh
from memotest.world.observable import file_digest, file_digest_holds

if TYPE_CHECKING:
    from memotest.store import Store


class Section(InputKind):
    kind = Kind.SECTION

    def refine(
        self, inputs: list[Fingerprint], trace: Trace, states: FileStates, store: Store
    ) -> list[Fingerprint]:
        return [as_section(fp, trace) or fp for fp in inputs]

    def verify(
        self,
        states: FileStates,
        path: str,
        digest: str,
        sig: Sequence[int] | None,
        verified_ns: int,
        link: str | None,
    ) -> bool | Refresh:
        st = regular_file(states, path)
        if st is None:
            return False
        if sig_holds(states, st, sig, verified_ns):
            return True
        try:
            data, read_sig, verified = read_file(states, path)
        except OSError:
            return False
        if digest_of(path, data) != digest:
            return False
        return refresh(states, sig, verified_ns, read_sig, verified)

    def changed(
        self,
        recorded: Input,
        states: FileStates,
        st: os.stat_result,
        names: Sequence[str] | None,
    ) -> str | None:
        if not stat.S_ISREG(st.st_mode):
            return f"is now {type_word(st)}"
        try:
            with open(recorded.path, "rb") as f:
                now = digest_of(recorded.path, f.read())
        except OSError as e:
            return f"is unreadable ({e.strerror})"
        reader = reader_for(recorded.path)
        if reader is None:
            return "changed"
        if now == UNPARSED:
            return reader.unparsed
        return f"{reader.holds_by} changed"


def as_section(fp: Fingerprint, trace: Trace) -> Fingerprint | None:
    """``fp``, a ``file`` input, as a ``section`` input if only its reader read it in the
    run (``Trace.sections``, nobody else: ``Trace.read_elsewhere``; or its reader has no
    callers) and memotest can parse the file as it was fingerprinted; else None."""
    if fp.kind is not Kind.FILE or fp.link is not None:
        return None
    reader = reader_for(fp.path)
    if reader is None:
        return None
    if reader.callers and (
        not trace.sections or fp.path not in trace.sections or fp.path in trace.read_elsewhere
    ):
        return None
    try:
        with open(fp.path, "rb") as f:
            data = f.read()
            st = os.fstat(f.fileno())
    except OSError:
        return None
    digest = reader.digest(data, fp.path)
    if digest == UNPARSED or not file_digest_holds(
        fp.digest, file_digest(xxhash.xxh3_128_hexdigest(data), st)
    ):
        return None  # not what was fingerprinted, or memotest cannot parse it
    return Fingerprint(fp.path, Kind.SECTION, digest, fp.sig, fp.verified_ns)


def part_of(fp: Fingerprint) -> str | None:
    """For a ``file`` fingerprint of a file some reader takes a part of: the digest of
    that part now (raises ``OSError``); else None."""
    if fp.kind is not Kind.FILE or reader_for(fp.path) is None:
        return None
    with open(fp.path, "rb") as f:
        return digest_of(fp.path, f.read())


KIND = Section()
