"""The psutil backstop: polls a traced process tree and finds processes without the shim.

The shim reports every process it is loaded into. Polling sees processes that it does not
report (a static binary, a setuid program, anything the loader would not preload into):
each descendant's executable, argv, cwd, whether the shim is mapped into it, and, for
those without it, their open files. Processes are keyed by pid and create time, so a
reused pid is a new process. Polling starts fast and backs off, so that short runs are
watched closely and long runs cost little.
"""

from __future__ import annotations

import math
import os
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from memotest.lazy import lazy_module

if TYPE_CHECKING:
    import ctypes

    import psutil
else:  # imported while a run is watched only
    ctypes = lazy_module("ctypes")
    psutil = lazy_module("psutil")


PR_SET_CHILD_SUBREAPER = 36
FIRST_INTERVAL = 0.005
MAX_INTERVAL = 0.1
FULL_SCAN_INTERVAL = 1.0  # seconds between two reads of every /proc/PID/stat


@dataclass
class Seen:
    """One process image seen by polling."""

    pid: int
    ppid: int | None
    exe: str | None
    argv: list[str]
    cwd: str | None
    shim_mapped: bool | None  # None: could not tell
    open_files: set[str] = field(default_factory=set)


def become_subreaper() -> None:
    """Makes orphaned descendants re-parent to this process instead of init, so that a
    daemonized grandchild stays in the tree where polling and killing can find it."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def shim_mapped(pid: int, shim: str) -> bool | None:
    """Whether ``shim`` is mapped into process ``pid`` (None if that cannot be read)."""
    try:
        with open(f"/proc/{pid}/maps", "rb") as f:
            return shim.encode() in f.read()
    except OSError:
        return None


class ProcessWatcher:
    """Polls the tree under ``root_pid`` in a thread until :meth:`stop`."""

    def __init__(self, root_pid: int, shim: str, trace_dir: str) -> None:
        self.root_pid = root_pid
        self.shim = shim
        self.trace_dir = trace_dir
        #: Trace folders whose orphans are ours (a warm worker's: see ``tracer/warm/``).
        self.ours_dirs = {trace_dir}
        self.foreign: set[int] = set()
        self._me = os.getpid()
        self._me_ctime = psutil.Process(self._me).create_time()
        self._ppids = PpidMap()
        self.seen: dict[tuple[int, float, str | None], Seen] = {}
        self.known: set[tuple[int, float]] = set()  # (pid, create_time) of every descendant
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="memotest-procwatch", daemon=True)

    def start(self) -> ProcessWatcher:
        self._thread.start()
        return self

    def stop(self) -> list[psutil.Process]:
        """Stops polling and looks one last time. Returns the descendants still running
        (the root excluded), as :meth:`alive_descendants` would, from that same look."""
        self._stop.set()
        self._thread.join()
        procs = self.poll()  # one last look, for what is still alive
        return [p for p in procs if p.pid != self.root_pid and _running(p)]

    def _tree(self) -> list[psutil.Process]:
        """The root and every live descendant, including orphans re-parented to us."""
        try:
            mine = self._ppids.descendants(self._me, self._me_ctime)  # parents first
        except OSError:
            return []
        tree = {self.root_pid}
        out = []
        for p in mine:
            try:
                if p.pid == self.root_pid:
                    out.append(p)
                    continue
                ppid = p.ppid()
                if (
                    ppid in tree
                    or (p.pid, p.create_time()) in self.known
                    or (ppid == self._me and self._ours(p))
                ):
                    tree.add(p.pid)
                    out.append(p)
            except psutil.Error:
                continue
        return out

    def _ours(self, p: psutil.Process) -> bool:
        """An orphan we never saw under the root: ours if it carries our trace folder."""
        if p.pid in self.foreign:
            return False
        try:
            mine = p.environ().get("MEMOTEST_TRACE_DIR") in self.ours_dirs
        except psutil.Error:
            mine = False
        if not mine:
            self.foreign.add(p.pid)
        return mine

    def alive_descendants(self) -> list[psutil.Process]:
        """Descendants of the root still running (the root itself excluded)."""
        return [p for p in self._tree() if p.pid != self.root_pid and _running(p)]

    def reap_orphans(self, procs: list[psutil.Process] | None = None) -> None:
        """Collects the exit status of re-parented descendants that have ended."""
        for p in self._tree() if procs is None else procs:
            try:
                if (
                    p.pid != self.root_pid
                    and p.ppid() == self._me
                    and p.status() == psutil.STATUS_ZOMBIE
                ):
                    os.waitpid(p.pid, os.WNOHANG)
            except (psutil.Error, ChildProcessError):
                continue

    def _run(self) -> None:
        interval = FIRST_INTERVAL
        while not self._stop.wait(interval):
            self.poll()
            interval = min(interval * 1.5, MAX_INTERVAL)

    def poll(self) -> list[psutil.Process]:
        """Looks at the tree once; returns the processes it found."""
        procs = self._tree()
        for p in procs:
            self._look(p)
        self.reap_orphans(procs)
        return procs

    def _look(self, p: psutil.Process) -> None:
        try:
            with p.oneshot():
                ctime = p.create_time()
                exe = p.exe() or None
                key = (p.pid, ctime, exe)
                self.known.add((p.pid, ctime))
                seen = self.seen.get(key)
                if seen is None:
                    seen = Seen(
                        pid=p.pid,
                        ppid=p.ppid(),
                        exe=exe,
                        argv=p.cmdline(),
                        cwd=_cwd(p),
                        shim_mapped=shim_mapped(p.pid, self.shim),
                    )
                    self.seen[key] = seen
                elif seen.shim_mapped is not True:
                    # The loader may not have mapped it yet when we first looked.
                    seen.shim_mapped = shim_mapped(p.pid, self.shim)
                if seen.shim_mapped is False and p.status() != psutil.STATUS_ZOMBIE:
                    seen.open_files.update(f.path for f in p.open_files())
        except psutil.Error:
            return


def _read_ppid(pid: int) -> int | None:
    """The parent of ``pid`` from ``/proc/PID/stat``, None if it is gone."""
    try:
        fd = os.open(f"/proc/{pid}/stat", os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        data = os.read(fd, 4096)
    except OSError:
        return None
    finally:
        os.close(fd)
    # "pid (comm) state ppid ...": comm may hold spaces and parentheses.
    try:
        return int(data[data.rfind(b")") + 2 :].split(None, 2)[1])
    except (IndexError, ValueError):
        return None


class PpidMap:
    """The parent of every process, kept from one poll to the next.

    psutil's ``children(recursive=True)`` reads ``/proc/PID/stat`` of every process on the
    machine, which polling does a few times a second (about 1 ms each time with 80
    processes, taken from the traced command on a busy machine). Here ``/proc`` is listed
    at each scan, but a process's ``stat`` is read only if the previous scan did not list
    its pid, or if it was one of our descendants (an orphan's parent changes when it is
    re-parented to us, the subreaper), and every process's once a second
    (``FULL_SCAN_INTERVAL``). A process can only join our tree by being born into it,
    under a pid the previous scan did not list: the kernel hands out pids in turn, so it
    would have to go through every other pid between two scans to give a live one's pid
    again. The once-a-second full scan bounds even that.
    """

    def __init__(self) -> None:
        self._ppid: dict[int, int] = {}
        self._mine: set[int] = set()
        self._full_at = -math.inf

    def scan(self) -> dict[int, int]:
        now = time.monotonic()
        full = now - self._full_at >= FULL_SCAN_INTERVAL
        if full:
            self._full_at = now
        old, mine = self._ppid, self._mine
        new: dict[int, int] = {}
        for name in os.listdir("/proc"):
            if not name.isdigit():
                continue
            pid = int(name)
            ppid = old.get(pid) if not full and pid not in mine else None
            if ppid is None:
                ppid = _read_ppid(pid)
                if ppid is None:
                    continue  # gone meanwhile
            new[pid] = ppid
        self._ppid = new
        return new

    def descendants(self, pid: int, ctime: float) -> list[psutil.Process]:
        """Every descendant of ``pid`` (created at ``ctime``), each after its parent:
        psutil's ``Process(pid).children(recursive=True)``, over :meth:`scan`."""
        kids: dict[int, list[int]] = {}
        for child, parent in self.scan().items():
            kids.setdefault(parent, []).append(child)
        out: list[psutil.Process] = []
        seen: set[int] = set()
        stack = [pid]
        while stack:
            parent = stack.pop()
            if parent in seen:
                continue  # pids reused while /proc was read can make a cycle
            seen.add(parent)
            for child in kids.get(parent, ()):
                try:
                    proc = psutil.Process(child)
                    # A "child" older than its parent is a reused pid.
                    if ctime <= proc.create_time():
                        out.append(proc)
                        stack.append(child)
                except psutil.Error:
                    continue
        self._mine = {p.pid for p in out}
        return out


def _cwd(p: psutil.Process) -> str | None:
    try:
        return p.cwd()
    except psutil.Error:
        return None


def _running(p: psutil.Process) -> bool:
    try:
        return p.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False
