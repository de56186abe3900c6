"""Turns the shim's events and the poller's sightings into a :class:`Trace`.

Three jobs: classify each path by what the tree did with it first (a file the tree
replaced before reading is an output, not an input; one it changed in place, ``U``, keeps
what it held, so a read after the change is still a read of an input), pair every
``exec`` with the announcement of the new image (an image that never announced itself ran
without the shim), and fold in the processes that polling saw but the shim never reported.

An image that never announced itself did not always run without the shim: a pager a test
starts and kills at once dies before its first call into the C library (its parent reaped
it killed by a signal: the shim's ``G``, the next record of that pid after its ``E``). The shim
announces an image (``P``) in its constructor or at the first call it interposes,
whichever comes first; so an image that had the shim loaded and never announced itself
made no such call in its whole life: it ran the dynamic loader and no code that opened,
stat'ed, listed, executed or connected to anything. It had the shim loaded when three
things hold: the process found this same shim file at ``MEMOTEST_SHIM`` right before its
``execve`` (the shim's ``H`` record: same device and inode, in the root and mount
namespace the new image keeps), the program is started by glibc's loader
(``elf.loads_the_shim``: it preloads ``LD_PRELOAD`` before any code of the program runs),
and nothing makes the loader ignore ``LD_PRELOAD`` (``elf.why_untraceable``: setuid,
file capabilities, another ELF class, Go). Such an exec is not a hole in the trace; its
program file is an input as any executed file.

Order across processes: the shim writes a replacement's record (``W``, ``N``, ``D``)
after the call made it, and a read's (``R``) after the open but before any byte is read,
so a replacement logged before a read happened before that read's data, whatever the
processes; a read logged first is a read of the input anyway. A change in place needs no
order at all: the earlier content survives it, so every read of the file counts.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import TYPE_CHECKING

from memotest.lazy import lazy_module
from memotest.model import Incomplete, ProcessInfo, Trace
from memotest.tracer.creations import held_as
from memotest.tracer.elf import loads_the_shim, why_untraceable
from memotest.tracer.fold import Fold
from memotest.tracer.listing_reports import Listings, combined
from memotest.tracer.log import Event
from memotest.tracer.procwatch import Seen

if TYPE_CHECKING:
    import psutil
else:
    psutil = lazy_module("psutil")  # imported while a run is watched only


def build_trace(
    *,
    command: list[str],
    exit_code: int,
    root_pid: int,
    events: list[Event],
    damage: str | None,
    records_lost: bool,
    seen: list[Seen],
    leftovers: list[psutil.Process],
    shim: str,
    trace_dir: str,
    worker_pid: int | None = None,
    listing_reports: Mapping[int, Listings | None] | None = None,
    vouched: Collection[int] = (),
    own_reads: Collection[tuple[int, str]] = (),  # (pid, path): tracer/warm/vouched.py
    prior: Fold | None = None,
) -> Trace:
    """``worker_pid``: the warm worker the command was forked from (``tracer/warm/``): what it
    listed, the run reports on as on its own listings (``worker/listings.py``).
    ``listing_reports``: what processes of the tree reported of their listings, by pid
    (``tracer/listing_reports.py``); those of ``vouched`` pids are taken as they are (a
    worker's run, for itself and the worker), the others only from a pid that was one
    process image in the whole trace. They make ``Trace.listings``. ``prior``: the
    events that came before ``events``, folded (a warm worker's start-up: ``fold.py``)."""
    if prior is None:
        fold = Fold(command, exit_code, shim)
    else:
        fold = prior.copy()
        fold.trace.command, fold.trace.exit_code = command, exit_code
    fold.skip = (trace_dir, trace_dir + "/")
    fold.feed(events, root_pid, own_reads)
    trace, clean = fold.trace, fold.clean
    incomplete, images, announced = trace.incomplete, fold.images, fold.announced
    pending, spawned, exec_paths = fold.pending, fold.spawned, fold.exec_paths
    reachable, killed, listers = fold.reachable, fold.killed, fold.listers
    two_lives, seen_as, read_back = fold.two_lives, fold.seen_as, fold.read_back
    strictly_missing, changed = fold.strictly_missing, fold.changed

    # Every exec must be answered by the new image announcing itself (PROTOCOL.md).
    # An exec excused as killed before the shim's constructor (the rule above): polling
    # may have seen that process in the same window, before the loader mapped the shim.
    excused = {
        (pid, path)
        for pid, paths in pending.items()
        for path in paths
        if (pid, path) in reachable and (pid, path) in killed and _shim_loads(path)
    }
    unanswered = [
        (pid, path)
        for pid, paths in pending.items()
        for path in paths
        if (pid, path) not in excused
    ]
    unanswered += [(pid, path) for pid, path in spawned if not announced[pid]]
    for pid, path in unanswered:
        reason = why_untraceable(path) or "the program ran without the shim"
        incomplete.append(Incomplete(pid, path, reason))
    trace.execs.update(exec_paths)
    excused_pids = {pid for pid, _path in excused}
    if not announced[root_pid] and root_pid not in pending:
        exe = command[0] if command else None
        reason = why_untraceable(_which(exe)) or "the shim did not load into the command"
        incomplete.append(Incomplete(root_pid, exe, reason))

    # Programs that load the shim but bypass libc (Go).
    for info in images.values():
        reason = why_untraceable(info.exe)
        if reason:
            incomplete.append(Incomplete(info.pid, info.exe, reason))

    # What polling saw that the shim did not report.
    for s in seen:
        if s.pid in images:
            continue
        traced = bool(s.shim_mapped)
        images[s.pid] = ProcessInfo(s.pid, s.ppid, s.exe, s.argv, s.cwd, traced)
        if s.shim_mapped is False and s.pid not in excused_pids:
            reason = why_untraceable(s.exe) or "the shim is not loaded in this process"
            incomplete.append(Incomplete(s.pid, s.exe, reason))
            trace.reads.update(p for p in s.open_files if clean(p) and p not in changed)
            if s.exe:
                trace.execs.add(s.exe)

    for p in leftovers:
        try:
            exe = p.exe()
        except psutil.Error:
            exe = None
        incomplete.append(Incomplete(p.pid, exe, "still running after the command exited"))

    if damage:
        incomplete.append(Incomplete(None, None, damage))
    if records_lost:
        incomplete.append(Incomplete(None, None, "the shim could not write every record"))

    one_image = {pid for pid, n in announced.items() if n == 1} - two_lives
    _listings(trace, listers, listing_reports, vouched, one_image, (root_pid, worker_pid))
    trace.execs = {p for p in (clean(x) for x in trace.execs) if p is not None}
    trace.processes = sorted(images.values(), key=lambda i: i.pid)
    trace.missing_or = held_as(seen_as, read_back | (trace.reads & seen_as.keys()))
    for path in strictly_missing:
        trace.missing_or.pop(path, None)
    trace.found_dirs = {
        path
        for path in fold.dirs_found
        if path in trace.missing_or and path not in fold.or_dir_missed
    }
    # only probed: nothing of the tree looked at them otherwise (``inputs/probed.py``)
    trace.probed -= trace.reads | trace.execs | trace.loaded | trace.missing
    trace.probed -= trace.writes | trace.deleted
    trace.incomplete = _dedup(incomplete)
    trace.complete = not trace.incomplete
    return trace


def _listings(
    trace: Trace,
    listers: dict[str, set[int]],
    reports: Mapping[int, Listings | None] | None,
    vouched: Collection[int],
    one_image: set[int],
    own: tuple[int, int | None],
) -> None:
    """``Trace.listings`` from the reports that can be trusted, and the folders listed by a
    process other than the command's own (and the worker's) that reported nothing."""
    trusted = {
        pid: rep for pid, rep in (reports or {}).items() if pid in vouched or pid in one_image
    }
    for path, pids in listers.items():
        if any(pid not in own and pid not in trusted for pid in pids):
            trace.listed_elsewhere.add(path)
    if reports:
        trace.listings = combined(listers, trusted)


def _which(exe: str | None) -> str | None:
    if not exe:
        return None
    if "/" in exe:
        return exe
    import shutil

    return shutil.which(exe)


def _dedup(items: list[Incomplete]) -> list[Incomplete]:
    seen: set[tuple[int | None, str | None, str]] = set()
    out = []
    for i in items:
        key = (i.pid, i.exe, i.reason)
        if key not in seen:
            seen.add(key)
            out.append(i)
    return out


def _shim_loads(path: str) -> bool:
    """Whether the program at ``path`` preloads the shim before any code of its own runs
    (see the module's docstring: the image made no call the shim would have seen)."""
    return why_untraceable(path) is None and loads_the_shim(path)
