"""The shim's events folded into what a :class:`Trace` is made of
(:func:`memotest.tracer.collect.build_trace`, whose docstring says the rules).

A :class:`Fold` takes events in order (:meth:`Fold.feed`) and may be copied between two
of them: a warm worker's start-up, the same before each run it forks, is folded once per
worker, and each run's own events are folded into a copy of that (``tracer/run.py``).
Folding the start-up apart from a run drops nothing: no rule looks ahead, and what a
rule asks of the run (its root pid, its trace folder) is asked of the run's events only:
the start-up's are another process's (read elsewhere, as before), and never under the
run's trace folder, which did not exist then.
"""

from __future__ import annotations

import copy
import errno
import os
from collections import Counter
from collections.abc import Collection, Iterable

from memotest.model import DIR_OF_BITS, ORDERLESS_PROGRAMS, Incomplete, ProcessInfo, Trace
from memotest.tracer.creations import OR_STATES, mkdir_p
from memotest.tracer.log import Event
from memotest.world.network import unix_path_not_there

PSEUDO_ROOTS = ("/proc", "/sys", "/dev")
#: Under a pseudo root, but real files: ``/dev/shm`` is a tmpfs (POSIX shared memory and
#: semaphores, and any file a program puts there).
REAL_UNDER_PSEUDO = ("/dev/shm",)
ABSENT_ERRNOS = {str(errno.ENOENT), str(errno.ENOTDIR)}


def is_pseudo(path: str) -> bool:
    """Paths of kernel file systems, which are never inputs. A path that names a real file
    through ``/proc`` or ``/dev`` (``/proc/self/cwd/x``, ``/dev/fd/3``, ``/dev/stdin``) has
    already been rewritten by the shim to the file it names (``_shim/procfs.c``); what is
    left there names no file (a pipe, a socket, a terminal, kernel state)."""
    if not path.startswith(PSEUDO_ROOTS):
        return False  # the test below for nearly every path, at the cost of one call
    if any(path == r or path.startswith(r + "/") for r in REAL_UNDER_PSEUDO):
        return False
    return any(path == r or path.startswith(r + "/") for r in PSEUDO_ROOTS)


def resolve_dotdot(path: str) -> str:
    """Resolves ``..`` against the real file system: ``link/..`` is the parent of the
    link's target, not of the link. The last component itself is kept as it is."""
    if "/.." not in path:
        return path
    head, tail = os.path.split(path)
    if tail == "..":
        return os.path.realpath(path)
    return os.path.join(os.path.realpath(head), tail)


class Fold:
    """The state of :func:`~memotest.tracer.collect.build_trace`'s pass over the events."""

    def __init__(self, command: list[str], exit_code: int, shim: str) -> None:
        self.trace = trace = Trace(command=command, exit_code=exit_code)
        trace.timed = set()
        self.shim = shim
        self.skip: tuple[str, ...] = ()  # the run's trace folder (``clean``)
        self.changed: set[str] = set()  # paths the tree wrote or deleted so far
        self.images: dict[int, ProcessInfo] = {}
        self.announced: Counter[int] = Counter()
        self.pending: dict[int, list[str]] = {}  # own execs awaiting the new image's P
        self.spawned: list[tuple[int, str]] = []  # posix_spawn children: P may come first
        self.exec_paths: set[str] = set()
        self.reachable: set[tuple[int, str]] = set()  # own execs that found this shim (H)
        self.last_exec: dict[int, str] = {}  # pid: its own E's path, while nothing followed
        self.killed: set[tuple[int, str]] = set()  # own execs reaped killed by a signal next
        self.listers: dict[str, set[int]] = {}  # folder: the pids that listed it
        self.two_lives: set[int] = set()  # pids seen as another image, or listing before
        #: Each raw path resolved, or None for a kernel file system's or the shim (the
        #: trace folder is asked apart: ``clean``).
        self.norm: dict[str, str | None] = {}
        self.by_pid: dict[int, bool] = {}  # whether the image of a pid is orderless (T)
        self.seen_as: dict[str, set[str]] = {}  # "absent or ..." (Y, V, Q, J)
        self.read_back: set[str] = set()  # of those, read by the tree, before or after
        self.strictly_missing: set[str] = set()  # missed by any other lookup (M)
        #: Folders an exist_ok ``mkdir`` found (``Z``), each with the pids that found it:
        #: their trees' later lookups of the path are implied (:func:`implied`).
        self.dirs_found: dict[str, set[int]] = {}
        self.found_empty: set[str] = set()  # of those, empty when first found: same stat
        self.or_dir_missed: set[str] = set()  # missed inside an exist_ok creation (Y)
        self.looked: set[str] = set()  # found by a lookup that is no yes-or-no probe (S, T)

    def copy(self) -> Fold:
        """A fold that goes on from this one's state, this one left as it is."""
        new = copy.copy(self)
        trace = new.trace = copy.copy(self.trace)
        for name, value in vars(self.trace).items():
            if isinstance(value, (set, dict, list)):
                setattr(trace, name, copy.copy(value))
        for name in ("changed", "images", "announced", "spawned", "exec_paths", "reachable"):
            setattr(new, name, copy.copy(getattr(self, name)))
        for name in ("last_exec", "killed", "two_lives", "norm", "by_pid", "read_back"):
            setattr(new, name, copy.copy(getattr(self, name)))
        new.strictly_missing = set(self.strictly_missing)
        new.dirs_found = {path: set(pids) for path, pids in self.dirs_found.items()}
        new.found_empty = set(self.found_empty)
        new.or_dir_missed = set(self.or_dir_missed)
        new.looked = set(self.looked)
        new.pending = {pid: list(paths) for pid, paths in self.pending.items()}
        new.listers = {path: set(pids) for path, pids in self.listers.items()}
        new.seen_as = {path: set(states) for path, states in self.seen_as.items()}
        return new

    def clean(self, raw: str) -> str | None:
        got = self.norm.get(raw, "")
        if got == "":
            path = resolve_dotdot(raw)
            got = self.norm[raw] = None if is_pseudo(path) or path == self.shim else path
        if got is not None and self.skip and got.startswith(self.skip):
            return None
        return got

    def feed(
        self,
        events: Iterable[Event],
        root_pid: int | None,
        own_reads: Collection[tuple[int, str]] = (),
    ) -> None:
        """Folds ``events`` in, in order. ``root_pid``: the command's (None for a warm
        worker's start-up, whose events are all another process's than the run's)."""
        trace = self.trace
        incomplete = trace.incomplete
        changed, images, timed = self.changed, self.images, trace.timed
        assert timed is not None
        announced, pending, spawned = self.announced, self.pending, self.spawned
        exec_paths, reachable, last_exec = self.exec_paths, self.reachable, self.last_exec
        killed, listers, two_lives = self.killed, self.listers, self.two_lives
        by_pid, seen_as, read_back = self.by_pid, self.seen_as, self.read_back
        strictly_missing, clean = self.strictly_missing, self.clean
        dirs_found, or_dir_missed = self.dirs_found, self.or_dir_missed
        found_empty, looked, probed = self.found_empty, self.looked, trace.probed
        elsewhere = trace.read_elsewhere
        for ev in events:
            op = ev.op
            probe = op == "p"  # a yes-or-no probe's stat: an S that told what is there
            if probe:
                op = "S"
            if op == "G":  # written by the reaper, under the child's pid
                path = last_exec.pop(ev.pid, None)
                if path is not None:
                    killed.add((ev.pid, path))
                continue
            if op == "Z" and len(ev.fields) > 3 and not mkdir_p(images.get(ev.pid)):
                op = "S"  # outside an exist_ok scope: its caller may tell, it found it
            if op == "E" and len(ev.fields) == 1:
                last_exec[ev.pid] = ev.path
            elif not (op == "E" or op == "H"):
                last_exec.pop(ev.pid, None)  # the image (or a new one of that pid) did something
            if op in "RSTMYVQJ":
                path = clean(ev.path)
                if op == "R" and path in seen_as:
                    read_back.add(path)  # what an open that keeps the bytes found, it read
                if path is not None and path not in changed:
                    if op == "M" and mkdir_p(images.get(ev.pid)):
                        op = "Y"
                    if (
                        op in "ST"
                        and path in dirs_found
                        and (op == "S" or path in found_empty)  # T: its size, its links
                        and implied(path, ev.pid, dirs_found[path], images, changed)
                    ):
                        continue  # what the exist_ok mkdir left there, in either state
                    if op == "Y":
                        or_dir_missed.add(path)
                    if op in OR_STATES:
                        if op == "J":  # a rename onto it, or an unlink that left it absent
                            changed.add(path)
                        if path in trace.reads:
                            continue  # read before: its content says more than "absent or"
                        seen_as.setdefault(path, set()).add(OR_STATES[op])
                        op = "M"  # absent or that state: the same to its caller
                    elif op == "M":
                        strictly_missing.add(path)
                    (trace.reads if op == "R" else trace.missing if op == "M" else trace.stats).add(
                        path
                    )
                    if probe:
                        if path not in looked:
                            probed.add(path)
                    elif op in "ST":
                        looked.add(path)
                        probed.discard(path)
                    if op == "T":
                        orderless = by_pid.get(ev.pid)
                        if orderless is None:
                            orderless = by_pid[ev.pid] = _orderless(images.get(ev.pid))
                        if not orderless:
                            timed.add(path)
                    if op != "M" and ev.pid != root_pid and (ev.pid, path) not in own_reads:
                        elsewhere.add(path)
            elif op == "Z":  # an exist_ok mkdir (or ``mkdir -p``) found a folder it makes
                path = clean(ev.path)
                if path is not None and path not in changed and path not in trace.reads:
                    bits = ev.fields[1] if len(ev.fields) > 1 else "?"
                    seen_as.setdefault(path, set()).add(DIR_OF_BITS + bits)
                    if path not in dirs_found and ev.fields[2:3] == ("empty",):
                        found_empty.add(path)  # as a made one: its stat is one's too
                    dirs_found.setdefault(path, set()).add(ev.pid)
                    trace.missing.add(path)
            elif op in "WNDU":
                path = clean(ev.path)
                if path is not None:
                    # ``U`` (changed in place) keeps what the file held: reads after it still
                    # see the content from before the run, so they stay reads.
                    if op != "U":
                        changed.add(path)
                    trace.first_change.setdefault(path, op)
                    if op != "N":
                        trace.altered.add(path)
                    (trace.deleted if op == "D" else trace.writes).add(path)
            elif op == "L":
                path = clean(ev.path)
                if path is not None:
                    trace.listed.add(path)
                    listers.setdefault(path, set()).add(ev.pid)
                    if not announced[ev.pid]:
                        two_lives.add(ev.pid)  # the image before an exec, or a forked child
            elif op == "O":
                path = clean(ev.path)
                if path is not None:
                    trace.loaded.add(path)
            elif op == "C":
                trace.connects.add(ev.path)
                gone = unix_path_not_there(ev.path)
                if gone is not None and gone not in changed:
                    # what the connect found is the path's absence: an input as any failed
                    # lookup, under /dev too (``/dev/log`` appears when a syslog starts)
                    trace.missing.add(resolve_dotdot(gone))
            elif op == "B":
                trace.listens.add(ev.path)
            elif op == "A":
                trace.accepted.add(ev.path)
            elif op == "X":
                trace.sockets.add(ev.path)
            elif op == "H":
                reachable.add((ev.pid, ev.path))
            elif op == "E":
                exec_paths.add(ev.path)
                if len(ev.fields) > 1:
                    spawned.append((ev.pid, ev.path))
                else:
                    pending.setdefault(ev.pid, []).append(ev.path)
            elif op == "F":
                waiting = pending.get(ev.pid, [])
                if ev.path in waiting:
                    waiting.remove(ev.path)
                    if ev.path not in (p for w in pending.values() for p in w):
                        exec_paths.discard(ev.path)
                if len(ev.fields) > 1 and ev.fields[1] in ABSENT_ERRNOS:
                    path = clean(ev.path)
                    if path is not None and path not in changed:
                        trace.missing.add(path)
            elif op == "P":
                if announced[ev.pid]:
                    two_lives.add(ev.pid)
                announced[ev.pid] += 1
                waiting = pending.get(ev.pid)
                if waiting:
                    waiting.pop(0)  # this image answers the exec that came before it
                ppid, exe, cwd, *argv = ev.fields
                images[ev.pid] = ProcessInfo(ev.pid, _int(ppid), exe, argv, cwd, True)
                by_pid.pop(ev.pid, None)
                if exe:
                    trace.execs.add(exe)
            elif op == "K":
                if announced[ev.pid]:
                    two_lives.add(ev.pid)  # the pid of an image that ended, forked again
                parent = images.get(_int(ev.fields[0]) or -1)
                by_pid.pop(ev.pid, None)
                images.setdefault(
                    ev.pid,
                    ProcessInfo(
                        ev.pid,
                        _int(ev.fields[0]),
                        parent.exe if parent else None,
                        list(parent.argv) if parent else [],
                        parent.cwd if parent else None,
                        True,
                    ),
                )
            elif op == "I":
                incomplete.append(Incomplete(ev.pid, _exe(images, ev.pid), ev.path))


def implied(
    path: str, pid: int, finders: set[int], images: dict[int, ProcessInfo], changed: set[str]
) -> bool:
    """Whether a lookup of ``path`` by ``pid`` that found it is implied by the ``Z`` of
    one of ``finders`` (an exist_ok ``mkdir`` that found a folder there with the
    permission bits and owner it would have made it with): ``pid`` is a finder or a
    descendant of one, and the tree changed neither the path (the caller asks) nor a
    folder above it since. Where the path was absent, that ``mkdir`` made the same
    folder: the lookup finds it either way (a ``stat``'s size and link count too, where
    the folder found was empty: the caller asks)."""
    parent = os.path.dirname(path)
    while parent and parent != "/":
        if parent in changed:
            return False
        parent = os.path.dirname(parent)
    for _ in range(256):  # a ppid chain, which a reused pid could make a loop
        if pid in finders:
            return True
        info = images.get(pid)
        if info is None or info.ppid is None:
            return False
        pid = info.ppid
    return False


def _int(s: str | None) -> int | None:
    try:
        return int(s) if s is not None else None
    except ValueError:
        return None


def _orderless(image: ProcessInfo | None) -> bool:
    """Whether the process is one of :data:`ORDERLESS_PROGRAMS`: its stats are not in the
    run's modification-time order."""
    return image is not None and os.path.basename(image.exe or "") in ORDERLESS_PROGRAMS


def _exe(images: dict[int, ProcessInfo], pid: int) -> str | None:
    info = images.get(pid)
    return info.exe if info else None
