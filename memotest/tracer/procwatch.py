"""The psutil backstop: polls a traced process tree and finds processes without the shim.

The shim reports every process it is loaded into. Polling sees processes that it does not
report (a static binary, a setuid program, anything the loader would not preload into):
each descendant's executable, argv, cwd, whether the shim is mapped into it, and, for
those without it, their open files. Processes are keyed by pid and create time, so a
reused pid is a new process. Polling starts fast and backs off, so that short runs are
watched closely and long runs cost little.
"""

from __future__ import annotations

import ctypes
import os
import threading
from dataclasses import dataclass, field

import psutil

PR_SET_CHILD_SUBREAPER = 36
FIRST_INTERVAL = 0.005
MAX_INTERVAL = 0.1


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
        self.foreign: set[int] = set()
        self._me = os.getpid()
        self.seen: dict[tuple[int, float, str | None], Seen] = {}
        self.known: set[tuple[int, float]] = set()  # (pid, create_time) of every descendant
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="memotest-procwatch", daemon=True)

    def start(self) -> ProcessWatcher:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()
        self.poll()  # one last look, for what is still alive

    def _tree(self) -> list[psutil.Process]:
        """The root and every live descendant, including orphans re-parented to us."""
        try:
            mine = psutil.Process().children(recursive=True)  # breadth first: parents first
        except psutil.Error:
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
            mine = p.environ().get("MEMOTEST_TRACE_DIR") == self.trace_dir
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

    def poll(self) -> None:
        procs = self._tree()
        for p in procs:
            self._look(p)
        self.reap_orphans(procs)

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
