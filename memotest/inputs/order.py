"""``order``: the order of modification times among the files a run stat'ed.

A program can decide by which of two files is newer: make's "target older than a
prerequisite", ``test gen -nt src``, ``find -newer``, a test checking that a generated
file is newer than its source. The content of either file need not change for the answer
to: ``touch src`` flips it. Raw mtimes would re-run every target after each checkout, so
what is held is the *order* a program could have observed.

Which mtimes count: those of the run's ``file`` inputs that it looked up by path with a
call that handed it the times (``T`` in the trace: ``stat``, ``lstat``, ``fstatat``,
``statx``: ``Trace.timed``) before changing them, with their times as fingerprinted right
after the run (the time a ``file`` input was found with). Left out (``docs/limits.md``
says so):

- paths only looked up by calls that give no time (``access``, ``readlink``,
  ``realpath``, ``chdir``): no process had a time of them to compare;
- the stats of ``git`` (``model.ORDERLESS_PROGRAMS``), which compares each file's stat
  only with its own index entry, never two files (its stats of every tracked file would
  otherwise make a README edit or a checkout and back re-run every target that runs it);

- files only opened and read: an ``fstat`` of the open descriptor sees the mtime too, but
  the tracer cannot tell it from the ``fstat`` every Python ``open`` makes;
- files the run wrote (outputs): their time is set by the run itself, after any
  comparison it made of them;
- folders: a folder's mtime moves with every entry added or renamed (an editor's swap
  file, an atomic save), and every Python import stats the folders of ``sys.path``;
- files held by less than their content (``code``, ``section``): their mtime moves with
  every edit their finer kind lets through;
- Python modules and extensions (:data:`UNORDERED_SUFFIXES`): every import stats them,
  none orders them, and a checkout reorders the ones it rewrites;
- comparisons against the clock ("older than a day") and of access or change times.

The fingerprint is one per record, of at least two files: the digest names the CAS blob
of the files from the oldest to the newest, each marked ``<`` (newer than the one before)
or ``=`` (the same mtime) (:func:`order_blob`). Its path is the oldest of those files,
already an input of the record. It holds while each file's mtime keeps that relation to
the one before it (:func:`order_holds`): no sort and no system call on the no-op path (the
``file`` inputs' checks stat'ed every one already), three passes in C over the build's
stat cache.
"""

from __future__ import annotations

import operator
import os
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from memotest.inputs.base import InputKind
from memotest.model import CLOCK_SLACK_NS, Input, Kind, StatSig, Trace
from memotest.world.fingerprint import UNREADABLE, FileStates, Fingerprint, Refresh

if TYPE_CHECKING:
    from memotest.store import Store

_NEWER, _SAME = ord("<"), ord("=")
#: Files left out of the order: Python's import system stats every module it imports and
#: compares a source's mtime only for *equality* with its compiled cache's record of it
#: (a mismatch recompiles, to the same result), never orders two modules; and a ``git
#: checkout`` back to a branch rewrites the modules that differ, reordering them. Held in
#: the order, they would keep a branch switched back to from replaying (issue 17).
UNORDERED_SUFFIXES = (".py", ".pyc", ".pyi", ".pyd", ".so", ".pth")
#: An order's signature: none (the store keeps ``verified_ns`` only with one).
_NO_SIG = StatSig(0, 0, 0, 0)
#: A blob's marks after the first as :func:`operator.lt` answers them (``<``: 1, ``=``: 0).
_AS_LT = bytes.maketrans(b"<=", b"\x01\x00")


def order_blob(mtimes: Sequence[tuple[int, str]]) -> bytes:
    """The fingerprint's content: the marks, a NUL, then the paths from the oldest to the
    newest, each followed by a NUL; the mark of each is ``<`` (newer than the one before)
    or ``=`` (the same mtime). Every path shows as ``\\0PATH\\0``: :func:`mentions`."""
    items = sorted(mtimes)
    marks = bytearray()
    prev: int | None = None
    for mtime, _path in items:
        marks.append(_SAME if mtime == prev else _NEWER)
        prev = mtime
    return bytes(marks) + b"\0" + b"".join(os.fsencode(p) + b"\0" for _m, p in items)


class _Recorded(NamedTuple):
    """A decoded :func:`order_blob`."""

    blob: bytes
    marks: bytes
    paths: list[bytes]
    lt: bytes  # the marks after the first, as ``operator.lt`` of neighbours must answer


def split_order(blob: bytes) -> _Recorded:
    """The parts of an :func:`order_blob`."""
    marks, _, rest = blob.partition(b"\0")
    paths = rest.split(b"\0")
    if paths.pop() != b"" or len(paths) != len(marks) or not marks or marks.strip(b"<="):
        raise ValueError("not an order blob")
    return _Recorded(blob, marks, paths, marks[1:].translate(_AS_LT))


def localized(recorded: _Recorded, local: Callable[[str], str]) -> _Recorded:
    """``recorded`` with its paths, stored portable, made this machine's."""
    if local is str:
        return recorded
    paths = [os.fsencode(local(os.fsdecode(p))) for p in recorded.paths]
    blob = recorded.marks + b"\0" + b"".join(p + b"\0" for p in paths)
    return recorded._replace(blob=blob, paths=paths)


def mentions(recorded: _Recorded, path: str) -> bool:
    """Whether ``path`` is one of the recorded files (a search in C of the blob)."""
    return b"\0" + os.fsencode(path) + b"\0" in recorded.blob


class _Mtimes(dict):  # type: ignore[type-arg]
    """The build's mtimes by file-system path (bytes), from its stat cache; looked up in
    C by ``map`` (a miss alone calls Python)."""

    def __init__(self, states: FileStates) -> None:
        super().__init__()
        self.states = states

    def __missing__(self, path: bytes) -> int | None:
        st = self.states.stat(os.fsdecode(path))
        got = None if st is None or st is UNREADABLE else st.st_mtime_ns
        self[path] = got
        return got


def _now(states: FileStates) -> dict[str, Any]:
    """What this kind derived from the stat cache in the current check."""
    return states.derived.setdefault("order", {})


def order_holds(states: FileStates, recorded: _Recorded) -> bool:
    """Whether the files' mtimes are still in the recorded order: non-decreasing, and
    strictly increasing exactly where the record says ``<``. Three passes in C over the
    build's stat cache, no sort."""
    cache = _now(states)
    mtimes = cache.get("mtimes")
    if mtimes is None:
        mtimes = cache["mtimes"] = _Mtimes(states)
    now = list(map(mtimes.__getitem__, recorded.paths))
    if None in now:
        return False  # a file went (its own input says so)
    later = now[1:]
    return all(map(operator.le, now, later)) and bytes(map(operator.lt, now, later)) == recorded.lt


def changed_since(states: FileStates, since_ns: int) -> list[str]:
    """The paths stat'ed in this build whose ``ctime`` is not older than ``since_ns``:
    the only ones whose mtime can have moved since then (:class:`Order`)."""
    cache = _now(states)
    recent: list[tuple[int, str]] | None = cache.get("ctimes")
    if recent is None:
        recent = []
        for path in list(states.counters.stat_calls):
            st = states.stat(path)
            if st is not None and st is not UNREADABLE:
                recent.append((-st.st_ctime_ns, path))
        recent.sort()
        cache["ctimes"] = recent
    out = []
    for ctime, path in recent:
        if -ctime < since_ns:
            break
        out.append(path)
    return out


def what_flipped(states: FileStates, recorded: _Recorded) -> str:
    """For ``explain``: the first neighbours whose order is not the recorded one."""
    prev: int | None = None
    prev_path = ""
    for mark, raw in zip(recorded.marks, recorded.paths, strict=True):
        path = os.fsdecode(raw)
        st = states.stat(path)
        if st is None or st is UNREADABLE:
            return f"{path} is gone"
        mtime = st.st_mtime_ns
        if prev is not None:
            if mark == _SAME and mtime != prev:
                newer, older = (path, prev_path) if mtime > prev else (prev_path, path)
                return f"{newer} is now newer than {older} (they had the same mtime)"
            if mark == _NEWER and mtime == prev:
                return f"{path} now has the same mtime as {prev_path} (it was newer)"
            if mark == _NEWER and mtime < prev:
                return f"{prev_path} is now newer than {path}"
        prev, prev_path = mtime, path
    return "changed"


def _order(states: FileStates, digest: str) -> _Recorded | None:
    """The decoded blob of ``digest`` (None: gone from the store or damaged)."""
    cache = states.derived.setdefault("order-blobs", {})  # blobs do not change: per build
    got = cache.get(digest)
    if got is None and states.blobs is not None:
        try:
            got = cache[digest] = localized(split_order(states.blobs(digest)), states.local)
        except Exception:  # a blob gone or damaged: the fingerprint does not hold
            return None
    return got


class Order(InputKind):
    kind = Kind.ORDER
    worded_by_path = False
    blob = True  # the digest names the CAS blob of the files in mtime order
    late = True  # the fast path needs the files stat'ed by their own checks

    def refine(
        self, inputs: list[Fingerprint], trace: Trace, states: FileStates, store: Store
    ) -> list[Fingerprint]:
        stated = trace.timed if trace.timed is not None else trace.stats
        written = trace.writes
        files = [
            fp
            for fp in inputs
            if fp.kind is Kind.FILE
            and fp.sig is not None
            and fp.path in stated
            and fp.path not in written
            and not fp.path.endswith(UNORDERED_SUFFIXES)
        ]
        if len(files) < 2:
            return inputs
        portable = store.roots.portable  # the blob's paths, as a record's: portable
        mtimes = [(fp.sig.mtime_ns, portable(fp.path)) for fp in files if fp.sig is not None]
        digest = store.put_blob(order_blob(mtimes))
        seen = min(fp.verified_ns for fp in files)  # every mtime was read after it
        oldest = min((fp.sig.mtime_ns, fp.path) for fp in files if fp.sig is not None)[1]
        return [*inputs, Fingerprint(oldest, Kind.ORDER, digest, _NO_SIG, seen)]

    def begin_check(self, states: FileStates) -> None:
        states.derived.pop("order", None)

    def verify(
        self,
        states: FileStates,
        path: str,
        digest: str,
        sig: Sequence[int] | None,
        verified_ns: int,
        link: str | None,
    ) -> bool | Refresh:
        if verified_ns and path in states.counters.stat_calls:
            # The files were stat'ed by their own checks (this kind is ``late``): only
            # those changed since the order was last seen to hold can have moved.
            recent = changed_since(states, verified_ns - CLOCK_SLACK_NS)
            if not recent:
                return True
            order = _order(states, digest)
            if order is None:
                return False
            if not any(mentions(order, p) for p in recent):
                return True
        order = _order(states, digest)
        if order is None or not order_holds(states, order):
            return False
        # Holds as of every stat of this build: all taken after ``created_ns``.
        if states.created_ns > verified_ns:
            return Refresh(_NO_SIG, states.created_ns)
        return True

    def describe(
        self,
        recorded: Input,
        states: FileStates,
        st: os.stat_result | None,
        names: Sequence[str] | None,
    ) -> str | None:
        order = _order(states, recorded.digest)
        if order is None:
            return "the recorded modification-time order is gone from the store"
        if order_holds(states, order):
            return "changed"
        # The input's path is only the oldest of the files: the words name the two whose
        # relation flipped, and how many files the order holds.
        return (
            f"modification-time order of the {len(order.paths)} files it stat'ed changed: "
            f"{what_flipped(states, order)}"
        )


KIND = Order()
