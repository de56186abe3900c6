"""Plain data that flows between memotest's modules.

Nothing here does I/O. A :class:`Target` comes out of a loader, a :class:`Trace` out of the
tracer, an :class:`Input` list out of validation, and a :class:`Record` goes into the store.
"""

from __future__ import annotations

import enum
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import NamedTuple


@dataclass(frozen=True)
class SourceLocation:
    """Where a target was defined, for error messages (``memotest.toml:12``)."""

    file: str
    line: int | None = None

    def __str__(self) -> str:
        return f"{self.file}:{self.line}" if self.line else self.file


@dataclass(frozen=True)
class Target:
    """One memoizable command.

    ``command`` is a string (run with ``/bin/sh -c``) or a tuple (an argv). ``cwd`` is
    absolute. ``env`` holds the declared variables, which are always part of the key.
    ``warm`` names the modules a warm worker imports before forking runs of a ``PYTHON -m
    MODULE ...`` command (``tracer/warm/``): how the command is started, not what it
    does, so not part of the key. ``prepare`` (``MODULE ARG ...``), when given, is what the
    worker's plugin sets up once before forking (a test runner configured as a session
    with those arguments: ``worker/extensions.py``); runs with another ``prepare`` get
    another worker. Not part of the key either: the worker's observations while it
    prepares are part of every run's record.
    """

    name: str
    command: str | tuple[str, ...]
    cwd: str
    env: tuple[tuple[str, str], ...] = ()
    needs: tuple[str, ...] = ()
    timeout: float | None = None
    tags: frozenset[str] = frozenset()
    outputs: tuple[str, ...] = ()
    inputs: tuple[str, ...] = ()
    source: SourceLocation | None = None
    warm: tuple[str, ...] = ()
    prepare: tuple[str, ...] = ()
    #: Absolute folders the runner empties and makes again before each run, so that
    #: nothing in them is an input (``memotest/run/scratch.py``); set by drivers (tox's
    #: ``env_tmp_dir``), part of the key when any.
    scratch: tuple[str, ...] = ()

    @property
    def argv(self) -> list[str]:
        if isinstance(self.command, str):
            return ["/bin/sh", "-c", self.command]
        return list(self.command)


def output_problem(rel: str) -> str | None:
    """Why ``rel`` cannot be a declared output, or None: a declared output is a path
    relative to the target's folder, without ``..``, since a replay writes it back there.
    Checked when a target is loaded (``config.target_problems``) and again when a record's
    outputs are restored (``store/outputs.py``): a record may come from elsewhere."""
    if not rel or "\0" in rel:
        return f"declared output {rel!r} is not a path"
    if os.path.isabs(rel):
        return (
            f"declared output {rel!r} is absolute: name it relative to the target's cwd "
            "(a replay writes it back there)"
        )
    parts = rel.replace(os.sep, "/").split("/")
    if ".." in parts:
        return (
            f"declared output {rel!r} goes up with '..': a replay would write outside the "
            "target's folder (set cwd to a folder above it instead)"
        )
    if all(p in ("", ".") for p in parts):
        return f"declared output {rel!r} names the target's folder, not a file"
    return None


@dataclass(frozen=True)
class Incomplete:
    """A reason the tracer could not see everything a process did."""

    pid: int | None
    exe: str | None
    reason: str

    def as_json(self) -> dict[str, object]:
        return {"pid": self.pid, "exe": self.exe, "reason": self.reason}


@dataclass
class ProcessInfo:
    """One process of the traced tree. ``traced`` is true when the shim announced it."""

    pid: int
    ppid: int | None
    exe: str | None
    argv: list[str]
    cwd: str | None
    traced: bool

    def as_json(self) -> dict[str, object]:
        return {
            "pid": self.pid,
            "ppid": self.ppid,
            "exe": self.exe,
            "argv": self.argv,
            "cwd": self.cwd,
            "traced": self.traced,
        }


#: The observation sets of a trace, in the order ``memotest trace`` prints them.
OBSERVATION_KEYS = (
    "reads",
    "writes",
    "stats",
    "missing",
    "listed",
    "execs",
    "deleted",
    "loaded",
    "connects",
    "listens",
    "accepted",
    "sockets",
)


#: Programs whose ``stat`` of a file compares it only with their own record of that file,
#: never with another file: ``git`` checks each work-tree file's stat data against its
#: index entry (equality) and its mtime against the index's own (the "racy git" check,
#: which only decides whether to re-read the content, for the same answer). Their stats
#: are not in a run's modification-time order (``inputs/order.py``, ``docs/limits.md``).
ORDERLESS_PROGRAMS = frozenset({"git"})
#: ``Trace.missing_or``'s ``dir:BITS``: the shim's ``Z``, an exist_ok ``mkdir`` that found
#: a folder (not a symbolic link) of the permission bits ``BITS`` (octal) it would have
#: made it with (``tracer/creations.py``).
DIR_OF_BITS = "dir:"


@dataclass
class Trace:
    """What a command's whole process tree observed, as absolute normalized paths.

    ``reads``/``stats``/``missing`` hold only what the tree saw *before* changing it itself:
    a file the tree created and then read is in ``writes`` alone (an output, not an input).
    ``started_ns``/``finished_ns`` are ``time.time_ns()`` around the run.
    """

    command: list[str]
    exit_code: int
    complete: bool = True
    incomplete: list[Incomplete] = field(default_factory=list)
    reads: set[str] = field(default_factory=set)
    writes: set[str] = field(default_factory=set)
    stats: set[str] = field(default_factory=set)
    #: Of ``stats``: the paths a ``stat``-family call handed a process's times to (``T`` in
    #: the shim's log; ``access``, ``readlink``, ``realpath`` give none), but for the
    #: processes of :data:`ORDERLESS_PROGRAMS`. Only these can be in the run's mtime
    #: order (``inputs/order.py``). None: not told apart (every stat counts).
    timed: set[str] | None = None
    #: Of ``stats``: the paths only yes-or-no probes found (the shim's ``p``: ``isfile``,
    #: ``Path.exists``...), nothing of the tree read, ran, wrote or looked up otherwise:
    #: held by what is there, not size, times or links (``inputs/probed.py``).
    probed: set[str] = field(default_factory=set)
    missing: set[str] = field(default_factory=set)
    #: Of ``missing``: the paths whose absence only a call that ends the same on another
    #: state saw, mapped to that state: ``dir`` (missed inside a creation with
    #: ``exist_ok``: the shim's ``Y``; ``dir:BITS``, found by such a ``mkdir`` as a
    #: directory of those permission bits, ``Z``), ``file`` (a plain ``O_CREAT|O_TRUNC``
    #: open: ``V``), ``empty-file`` (a plain ``O_CREAT`` that keeps the bytes: ``Q``),
    #: ``not-dir`` (a file renamed onto it: ``J``). Held as "absent or that"
    #: (``inputs/absent.py``).
    missing_or: dict[str, str] = field(default_factory=dict)
    #: Of ``missing_or``: the folders that only an exist_ok ``mkdir`` found (``Z``, held
    #: as "absent or a directory of these bits") and no lookup of the tree missed: for
    #: conflicts, found (``loop/conflicts.py``), not looked for in vain.
    found_dirs: set[str] = field(default_factory=set)
    listed: set[str] = field(default_factory=set)
    execs: set[str] = field(default_factory=set)
    deleted: set[str] = field(default_factory=set)
    loaded: set[str] = field(default_factory=set)
    connects: set[str] = field(default_factory=set)
    #: The network beyond ``connects`` (``memotest/world/services.py``): endpoints the tree
    #: served (``"TYPE ADDRESS"``), peers of other machines that reached it, and raw,
    #: packet, netlink or other-family sockets it opened.
    listens: set[str] = field(default_factory=set)
    accepted: set[str] = field(default_factory=set)
    sockets: set[str] = field(default_factory=set)
    processes: list[ProcessInfo] = field(default_factory=list)
    #: Paths the tree changed, mapped to its first change: ``N`` created (did not exist
    #: before), ``W`` replaced, ``U`` changed in place (content kept: appended, written
    #: without truncation, mode or times changed) or ``D`` deleted (existed before). Tells
    #: what a directory listed by the target held before the target changed it.
    first_change: dict[str, str] = field(default_factory=dict)
    #: Paths the tree changed by any call other than the one that created them (``W``,
    #: ``U``, ``D``): a folder it made and then changed the mode of is here.
    altered: set[str] = field(default_factory=set)
    started_ns: int = 0
    finished_ns: int = 0
    #: The start on the file system's clock (the change time of a file touched right
    #: before the command started; 0 when unknown): see :func:`changed_since`.
    fs_started_ns: int = 0
    #: Paths that another process than the command's own (a subprocess, or the warm
    #: worker it was forked from) read or stat'ed: such a file stays whole (a finer kind
    #: holds only for what the command's own process did).
    read_elsewhere: set[str] = field(default_factory=set)
    #: For a run forked from a warm worker (``tracer/warm/``): the ``.py`` files only
    #: the import system read, mapped to the code objects of them the run executed, as
    #: ``[qualified name, first line, check digest]`` (``worker/codes.py``,
    #: ``inputs/code.py``). None when the run could not tell.
    code: dict[str, list[list]] | None = None
    #: For a run that could have been forked from a warm worker: why its Python files
    #: were kept whole (``runner.kept_whole``), None when it noted the code that ran.
    code_whole: str | None = None
    #: With ``code``, when a test runner's plugin labelled the parts of the run (each
    #: test): the code of the project's files each part executed
    #: (``worker/phases.py``'s ``phase_report``). None otherwise.
    phases: dict[str, object] | None = None
    #: Folders that a process other than the command's own (and the warm worker's)
    #: listed, and that reported nothing of its listings that can be trusted
    #: (``tracer/listing_reports.py``).
    listed_elsewhere: set[str] = field(default_factory=set)
    #: For a run forked from a warm worker, or one whose plain pytest processes reported
    #: (tox, nox: ``tracer/listing_reports.py``): the folders that only readers looking for
    #: certain names listed, in every process that listed them, each with ``[names,
    #: patterns]`` (``memotest/inputs/entries.py``). None when no process reported.
    listings: dict[str, list[list[str]]] | None = None
    #: For a run forked from a warm worker: the files that only their readers opened
    #: (``memotest/inputs/readers.py``: an ``entry_points.txt`` opened by
    #: ``importlib.metadata``'s entry point parser alone...).
    sections: set[str] | None = None
    #: For a run forked from a warm worker: each path the worker's start-up observed, as
    #: the check before this run's fork found it (``tracer/warm/stale.py``); the paths the
    #: run's own events name; and what the worker's runs found of the others, which they
    #: share (``recording/shared.py``). None otherwise.
    forked: Mapping[str, object] | None = None
    own_paths: set[str] | None = None
    shared: dict | None = None

    @property
    def created(self) -> set[str]:
        """Paths that did not exist before the tree created them."""
        return {p for p, op in self.first_change.items() if op == "N"}

    def as_json(self) -> dict[str, object]:
        """The object ``memotest trace`` prints: exactly the documented keys."""
        out: dict[str, object] = {
            "command": self.command,
            "exit_code": self.exit_code,
            "complete": self.complete,
            "incomplete": [i.as_json() for i in self.incomplete],
        }
        for key in OBSERVATION_KEYS:
            out[key] = sorted(getattr(self, key))
        out["processes"] = [p.as_json() for p in self.processes]
        return out


class Kind(str, enum.Enum):
    """How an input path is fingerprinted: the stored names. Each is one module of
    ``memotest/inputs/``, which says what it holds by."""

    FILE = "file"  #: content hash (xxh3-128) of what the path resolves to
    ABSENT = "absent"  #: the path did not exist (ENOENT/ENOTDIR)
    DIR = "dir"  #: the path is a directory (stat'ed, opened, not listed)
    LISTING = "list"  #: hash of the sorted entry names of a listed directory
    OTHER = "other"  #: exists and is neither file nor directory (fifo, socket, device)
    #: a Python source file, by the code of it the run executed: the digest names the CAS
    #: blob of the code objects' digests
    CODE = "code"
    #: a listed directory, by those of its entries that its readers looked for (the
    #: import system, ``importlib.metadata``, ``glob``...): the digest names the CAS blob
    #: of what they looked for and what was there
    ENTRIES = "entries"
    #: a file only its reader read (``memotest/inputs/readers.py``): the reader's name,
    #: ``:`` and the xxh3-128 of the part it takes (``entry-points:...``)
    SECTION = "section"
    #: a declared input that is a glob pattern, by the paths matching it: the digest
    #: names the CAS blob of those paths (each match is an input of its own besides)
    GLOB = "glob"
    #: the order of modification times among the files the run stat'ed: the digest names
    #: the CAS blob of those files from the oldest to the newest (``inputs/order.py``)
    ORDER = "order"
    #: what a memoized command left at a path it wrote or deleted: the state after its
    #: run, which a replay does not redo (``inputs/effect.py``)
    EFFECT = "effect"
    #: an endpoint where a datagram found no socket bound, or a connect to a Unix path
    #: was refused: the "path" is ``TYPE ADDRESS`` as the shim writes it; it holds while
    #: nobody serves there (``inputs/unserved.py``)
    UNSERVED = "unserved"
    #: a Unix path a datagram got through to from a socket no one can answer: the
    #: "path" is ``TYPE ADDRESS``; it holds while a datagram socket is bound there
    #: (``inputs/sink.py``)
    SINK = "sink"
    #: a path only yes-or-no probes found (``os.path.isfile``, ``Path.exists``...): the
    #: digest is its type after following links, one letter (``inputs/probed.py``)
    PROBED = "probed"


@dataclass(frozen=True)
class Input:
    """One recorded input: a path, how it is fingerprinted, and the fingerprint."""

    path: str
    kind: Kind
    digest: str


#: File system timestamps come from a coarse clock that can lag the one a start time is
#: read from; a change this close before the start is treated as after it, when the run's
#: start on the file system's own clock is not known (:attr:`Trace.fs_started_ns`).
CLOCK_SLACK_NS = 50_000_000
#: A file system whose timestamps are whole seconds (ext4 with 128-byte inodes) or two
#: seconds (FAT) truncates a change's time down: compared with the start floored to this.
COARSE_NS = 2_000_000_000


def changed_since(mtime_ns: int, ctime_ns: int, started_ns: int, fs_started_ns: int = 0) -> bool:
    """Whether a path with these times may have changed at or after a run's start.

    ``fs_started_ns`` is the start as the file system's clock tells it: the change time
    the kernel gave a file memotest touched right before the command started
    (``tracer/run.py``). Every later change gets a time at least that (the kernel stamps
    changes from one clock, coarse but never going back: Linux's multigrain timestamps
    keep that order too), so a change strictly before it is before the run, however
    close: no blanket slack is needed, and a file rewritten a few milliseconds before the
    start (an installer's ``.pth``) is not taken for one changed while the run ran. A time
    equal to it may be either, and counts as during. Times in whole seconds are compared
    with the start floored to two seconds. Without it, ``started_ns`` less
    :data:`CLOCK_SLACK_NS`. Out of reach, as before: the clock set back during the run,
    and a file system whose times come from another machine's clock (NFS)."""
    changed = max(mtime_ns, ctime_ns)
    if not fs_started_ns:
        return changed >= started_ns - CLOCK_SLACK_NS
    if mtime_ns % 1_000_000_000 == 0 and ctime_ns % 1_000_000_000 == 0:
        return changed >= fs_started_ns - fs_started_ns % COARSE_NS
    return changed >= fs_started_ns


class StatSig(NamedTuple):
    """The stat signature a fingerprint was taken with: equal signatures, same content."""

    mtime_ns: int
    size: int
    ino: int
    ctime_ns: int

    @classmethod
    def of(cls, st: os.stat_result) -> StatSig:
        """The signature of a stat result."""
        return cls(st.st_mtime_ns, st.st_size, st.st_ino, st.st_ctime_ns)

    def touched_since(self, started_ns: int, fs_started_ns: int = 0) -> bool:
        """Whether this signature shows a change at or after the start
        (:func:`changed_since`)."""
        return changed_since(self.mtime_ns, self.ctime_ns, started_ns, fs_started_ns)


@dataclass
class Outcome:
    """How one run of a target ended. ``status`` is passed, failed, timeout, error or
    skipped (the command said so: :mod:`memotest.run.runner`, with ``skip_reason``)."""

    target: Target
    status: str
    exit_code: int | None
    duration: float
    log: bytes
    trace: Trace | None = None
    error: str | None = None
    tmpdir: str = ""
    #: The run's own folder (its TMPDIR, captured log and trace), removed after the run:
    #: nothing in it, nor the folder itself, is ever an input.
    workdir: str = ""
    #: The target's scratch folders the runner made fresh before the run
    #: (``memotest/run/scratch.py``): nothing in them, nor the folders, is an input.
    scratch: tuple[str, ...] = ()
    attempts: int = 1
    #: The outcome of each test the run reported (``memotest/run/testcases.py``), None when
    #: it reported none.
    tests: list | None = None
    started: float = 0.0  # time.monotonic() at start, for the scheduler
    finished: float = 0.0
    #: memotest's own failure after the command ran (reading its trace): the result
    #: stands, not cached, with this as the reason (:mod:`memotest.drive.faults`).
    fault: Exception | None = None
    skip_reason: str | None = None
