"""From a trace to the inputs of a record: which observations are inputs, and whether the
result may be reused at all.

An observation is an input unless it is the target's own doing (a path it wrote before
reading is in ``Trace.writes`` only), a kernel file system (``/proc``, ``/sys``, ``/dev``,
already dropped by the tracer), the store, the target's private TMPDIR, or matches an
``ignore`` pattern. A result is not reusable when the trace is incomplete, when the target
talked to a non-loopback address, deleted a file it did not create, or when an input
changed while the target ran (its mtime is not older than the run's start).

A file the target read and then wrote (*rewritten*: a counter, a cache it refreshes, a
database opened read-write) is an input the run itself changed: its next run reads what
this one wrote. The result is reusable only when the file is as it was before the run,
which memotest can tell only if it fingerprinted the file then: it does so before each run
for the files the target's last record says it rewrote. So the first run that rewrites a
file is never reused; the next, if it leaves the file as it found it (a cache written
again with the same content), is, with the file as an input.
"""

from __future__ import annotations

import ipaddress
import os
import re
import stat
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import NamedTuple

import xxhash

from memotest import plugins
from memotest.fingerprint import FileStates, Fingerprint, listing_digest
from memotest.keys import TargetKey
from memotest.model import CLOCK_SLACK_NS, Kind, Outcome, Target, Trace
from memotest.store import STORE_DIR, Record, Store, output_value
from memotest.tracer import codemap, listings, sections
from memotest.tracer.collect import is_pseudo


@dataclass
class Observations:
    """What a record will hold: inputs to fingerprint, paths written, and reusability."""

    inputs: list[tuple[str, Kind]] = field(default_factory=list)
    writes: list[str] = field(default_factory=list)
    #: Files read (or executed, or loaded) before the target wrote them.
    rewritten: list[str] = field(default_factory=list)
    uncacheable: list[str] = field(default_factory=list)

    @property
    def cacheable(self) -> bool:
        return not self.uncacheable


@lru_cache(maxsize=256)
def _compile(pattern: str) -> re.Pattern[str]:
    out = []
    i = 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("/**", i) and i + 3 == len(pattern):
            out.append("(?:/.*)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    return re.compile("".join(out) + r"\Z")


class Ignore:
    """Matches paths against ``ignore`` globs (``**`` spans folders), and folders below
    which nothing is an input. Relative patterns are matched against the path relative to
    the project root and, for patterns starting with ``**``, against the absolute path."""

    def __init__(self, patterns: Iterable[str], root: str, folders: Iterable[str] = ()) -> None:
        self.root = root.rstrip("/") + "/"
        self.abs = [_compile(p) for p in patterns if p.startswith(("/", "**"))]
        self.rel = [_compile(p) for p in patterns if not p.startswith("/")]
        self.folders = tuple(f.rstrip("/") for f in folders if f.strip("/"))
        self._seen: dict[str, bool] = {}  # pattern matches: paths come back target after target

    def also(self, *folders: str) -> Ignore:
        """This matcher plus more folders (a target's private ``TMPDIR``); the two share
        the patterns and what they already matched."""
        other = Ignore((), self.root)
        other.abs, other.rel, other._seen = self.abs, self.rel, self._seen
        other.folders = self.folders + tuple(f.rstrip("/") for f in folders if f.strip("/"))
        return other

    def __call__(self, path: str) -> bool:
        for f in self.folders:
            if path == f or path.startswith(f + "/"):
                return True
        seen = self._seen.get(path)
        if seen is None:
            seen = self._seen[path] = self._match(path)
        return seen

    def _match(self, path: str) -> bool:
        if any(r.match(path) for r in self.abs):
            return True
        if path.startswith(self.root):
            rel = path[len(self.root) :]
            return any(r.match(rel) for r in self.rel)
        return False


def is_loopback(address: str) -> bool:
    """Whether a ``connect`` address (as the shim writes it) stays on this machine."""
    kind, _, rest = address.partition(":")
    if kind == "unix":
        return True
    if kind == "inet":
        host = rest.rsplit(":", 1)[0]
    elif kind == "inet6":
        host = rest.rsplit(":", 1)[0].strip("[]")
    else:
        return False
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped:
        ip = ip.ipv4_mapped
    return ip.is_loopback


def observe(trace: Trace, ignore: Ignore, *, allow_network: bool = False) -> Observations:
    """Classifies a trace's observations into inputs and writes, and collects every reason
    the result may not be reused."""
    obs = Observations()
    why = obs.uncacheable
    if not trace.complete:
        first = trace.incomplete[0]
        who = f" (pid {first.pid}, {first.exe})" if first.pid else ""
        more = f" and {len(trace.incomplete) - 1} more" if len(trace.incomplete) > 1 else ""
        why.append(f"trace incomplete: {first.reason}{who}{more}")
    if not allow_network:
        remote = sorted(a for a in trace.connects if not is_loopback(a))
        if remote:
            why.append(f"connected to a non-loopback address: {remote[0]}")
    written = trace.writes | trace.deleted
    obs.writes = sorted(p for p in written if not ignore(p))
    # Each seen before the tree changed it; a file an open created (``N``: absent before)
    # was not there to be read: the shim notes the read of an ``O_RDWR|O_CREAT`` open too.
    seen = trace.reads | trace.execs | trace.loaded
    obs.rewritten = sorted(
        p for p in seen & trace.writes if trace.first_change.get(p) != "N" and not ignore(p)
    )
    # The shim records a deletion only when it succeeded: the path existed before.
    foreign = sorted(p for p in trace.deleted - trace.writes if not ignore(p))
    if foreign:
        why.append(f"deleted a file it did not create: {foreign[0]}")

    added: set[tuple[str, Kind]] = set()

    def add(path: str, kind: Kind) -> None:
        if ignore(path) or (path, kind) in added:
            return
        added.add((path, kind))
        obs.inputs.append((path, kind))

    for path in trace.missing:
        add(path, Kind.ABSENT)
    for group in (trace.reads, trace.stats, trace.execs, trace.loaded):
        for path in group:
            if path not in written:
                add(path, Kind.FILE)  # whatever it is: file, directory or other
    for path in trace.listed:
        if trace.first_change.get(path) == "N" and path in trace.deleted:
            # A folder the target created (absent just before: PROTOCOL.md's N), listed
            # and deleted, as a temporary folder is: what it listed there, it put there
            # itself. What it depended on is that the folder was absent.
            add(path, Kind.ABSENT)
        else:
            add(path, Kind.LISTING)
    obs.inputs.sort()
    return obs


def changed_during_run(
    observed: Kind, now: Fingerprint, started_ns: int, trace: Trace | None = None
) -> str | None:
    """Why ``now`` (taken right after the run) may not be what the target saw, or None.
    ``observed`` is ABSENT for a failed lookup, LISTING for a listing, FILE otherwise."""
    path = now.path
    if observed is Kind.ABSENT:
        if now.kind is Kind.ABSENT:
            return None
        if trace is not None and path in trace.first_change:
            return f"{path} was created by the target after it looked for it"
        return f"{path} appeared while the target ran"
    if now.kind is Kind.ABSENT:
        return f"{path} disappeared while the target ran"
    if now.kind is Kind.FILE and now.sig is not None and now.sig.touched_since(started_ns):
        return f"file {path} changed while the target ran"
    return None


def listing_before_run(
    path: str, trace: Trace, skip: Callable[[str], bool], started_ns: int
) -> tuple[list[str] | None, str | None]:
    """For a listed directory that changed while the target ran: the entry names it had
    before the run (what the target saw), or why that cannot be known.

    Entries the tree created itself are taken out (the target did not see them; a later
    build will see them and run it again, which is right: its own leftovers are part of
    the next run's world), and entries it deleted or replaced are put back. Any other
    entry created or changed during the run by someone else (its ctime is not older than
    the start) makes the result unusable.
    """
    try:
        names = os.listdir(path)
    except OSError as exc:
        return None, f"directory {path} could not be listed after the run: {exc.strerror}"
    first = trace.first_change
    before = [
        os.path.basename(p)
        for p, op in first.items()
        if op == "D"
        and os.path.dirname(p) == path
        and not skip(p)
        and os.path.basename(p) not in names
    ]
    for name in names:
        entry = os.path.join(path, name)
        if skip(entry) or first.get(entry) == "N":
            continue
        if entry not in trace.writes:
            try:
                st = os.lstat(entry)
            except OSError:
                return None, f"directory {path} changed while the target ran"
            # A folder's ctime moves when its own entries change, which this listing does
            # not show; a file's moves when it is created (or written).
            if not stat.S_ISDIR(st.st_mode) and st.st_ctime_ns >= started_ns - CLOCK_SLACK_NS:
                return None, f"{entry} appeared or changed while the target ran"
        before.append(name)
    return sorted(before), None


def make_record(
    target: Target,
    outcome: Outcome,
    *,
    key: TargetKey,
    states: FileStates,
    store: Store,
    ignore: Sequence[str] | Ignore,
    root: Path,
    before: Mapping[str, Before] | None = None,
) -> Record:
    """The record of a finished run: its inputs fingerprinted right after the run, its
    log and declared outputs put into the store's CAS, and whether it may be reused.
    ``before``: the files the target's last record rewrote, fingerprinted before this run
    (:func:`snapshot`)."""
    assert outcome.trace is not None
    trace = outcome.trace
    if not isinstance(ignore, Ignore):
        ignore = Ignore(ignore, str(root))
    skip = ignore.also(str(root / STORE_DIR), outcome.workdir)
    obs = observe(trace, skip)
    if plugins.manager().hook.memotest_is_input.get_hookimpls():
        obs.inputs = [
            (path, kind)
            for path, kind in obs.inputs
            if plugins.call("memotest_is_input", path=path, target=target) is not False
        ]
    why = list(obs.uncacheable)
    inputs = []
    for path, kind in obs.inputs:
        if _links_into_kernel_fs(path, states):
            continue  # /etc/mtab -> /proc/self/mounts: a kernel file system, never an input
        try:
            fp = states.fingerprint(path, kind, fresh=True)
        except OSError as exc:
            why.append(f"cannot fingerprint {path}: {exc.strerror or exc}")
            continue
        if kind is Kind.LISTING and fp.kind is not Kind.LISTING and fp.kind is not Kind.ABSENT:
            why.append(f"{path} was listed but is no longer a directory")
        if fp.kind is Kind.LISTING and fp.sig and fp.sig.touched_since(trace.started_ns):
            names, change = listing_before_run(path, trace, states.skip_entry, trace.started_ns)
            if names is not None:
                digest, _ = listing_digest(os.fsencode(n) for n in names)
                # No signature: the next build lists it again and compares.
                fp = Fingerprint(path, Kind.LISTING, digest, None, 0, None, tuple(names))
            if change:
                why.append(change)
            inputs.append(fp)
            continue
        change = changed_during_run(kind, fp, trace.started_ns, trace)
        if change:
            why.append(change)
        inputs.append(fp)
    for path in obs.rewritten:
        held = rewritten_as_before(path, states, before or {}, trace)
        if isinstance(held, str):
            why.append(held)
        else:
            inputs.append(held)
    if trace.code:
        inputs = by_code(inputs, trace, states, store)
    if trace.listings:
        inputs = by_entries(inputs, trace, store)
    if trace.sections:
        inputs = by_section(inputs, trace)
    for extra in target.inputs:
        path = os.path.join(target.cwd, extra)
        try:
            inputs.append(states.fingerprint(path, Kind.FILE, fresh=True))
        except OSError as exc:
            why.append(f"cannot fingerprint declared input {path}: {exc.strerror or exc}")
    outputs: dict[str, str] = {}
    if outcome.status == "passed":
        for rel in target.outputs:
            path = os.path.join(target.cwd, rel)
            if os.path.isfile(path):
                executable = bool(os.stat(path).st_mode & 0o111)
                outputs[rel] = output_value(store.put_file(path), executable)
            else:
                why.append(f"declared output {rel} was not created")
    return Record(
        name=target.name,
        status=outcome.status,
        def_hash=key.def_hash,
        definition=key.definition,
        env_hash=key.env_hash,
        env=key.env,
        exit_code=outcome.exit_code,
        duration=outcome.duration,
        started_ns=trace.started_ns,
        finished_ns=trace.finished_ns,
        cacheable=not why,
        uncacheable_reason="; ".join(why[:3]) + (f" (+{len(why) - 3} more)" if len(why) > 3 else "")
        if why
        else None,
        inputs=inputs,
        writes=obs.writes,
        log_digest=store.put_blob(outcome.log),
        outputs=outputs,
        rewritten=obs.rewritten,
    )


class Before(NamedTuple):
    """A file as it was before a run: its fingerprint, and for a file whose reader may take
    only a part of it (``tracer/sections.py``: a ``*.gz``), the digest of that part."""

    fp: Fingerprint
    part: str | None = None


def snapshot(record: Record | None, states: FileStates) -> dict[str, Before]:
    """Before a run: the files the target's last run read and then wrote, so that
    :func:`make_record` can tell whether this run left them as they were."""
    out: dict[str, Before] = {}
    for path in record.rewritten if record is not None else ():
        try:
            fp = states.fingerprint(path, Kind.FILE, fresh=True)
            part = None
            if fp.kind is Kind.FILE and path.endswith(sections.GZIP_SUFFIX):
                with open(path, "rb") as f:
                    part = sections.section_digest(path, f.read())
        except OSError:
            continue  # unreadable now: the run cannot be shown to leave it as it was
        out[path] = Before(fp, part)
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
        now = states.fingerprint(path, Kind.FILE, fresh=True)
    except OSError as exc:
        return f"cannot fingerprint {path}: {exc.strerror or exc}"
    if (now.kind, now.digest) == (was.fp.kind, was.fp.digest):
        return now
    if was.part not in (None, sections.UNPARSED):
        part = as_section(now, trace)
        if part is not None and part.digest == was.part:
            return part  # its reader takes only that part, and the run left it as it was
    return f"{path} was read and then changed by the target: its next run reads what this one wrote"


def by_code(
    inputs: list[Fingerprint], trace: Trace, states: FileStates, store: Store
) -> list[Fingerprint]:
    """Turns the ``FILE`` inputs that are Python source files the run's own process
    imported, and nothing else read, into ``CODE`` inputs: fingerprinted by the code of
    them it executed (``tracer/codemap.py``). Their cached bytecode (``__pycache__``) is
    then no input: it is the same code, or Python compiles it anew."""
    assert trace.code is not None
    if states.blobs is None:
        states.blobs = store.read_blob
    coded: set[str] = set()
    out: list[Fingerprint] = []
    for fp in inputs:
        executed = trace.code.get(fp.path)
        if (
            executed is None
            or fp.kind is not Kind.FILE
            or fp.link is not None
            or fp.sig is None
            or fp.path in trace.py_elsewhere
        ):
            out.append(fp)
            continue
        try:
            tree = states.code_tree(fp.path, fp.sig)
        except OSError:
            out.append(fp)
            continue
        blob = None
        if tree.sig == fp.sig and not isinstance(tree.codes, Exception):
            blob = codemap.record_tree(tree.codes, executed, tree.memo)
        if blob is None:
            out.append(fp)
            continue
        digest = store.put_blob(blob)
        out.append(Fingerprint(fp.path, Kind.CODE, digest, fp.sig, fp.verified_ns))
        coded.add(fp.path)
    if not coded:
        return inputs
    return [fp for fp in out if not _bytecode_of(fp.path, coded)]


def by_entries(inputs: list[Fingerprint], trace: Trace, store: Store) -> list[Fingerprint]:
    """Turns the ``LISTING`` inputs that only readers looking for certain names listed
    (in the run's own process and its worker: ``tracer/listings.py``) into ``ENTRIES``
    inputs: fingerprinted by those of their entries that match what was looked for."""
    assert trace.listings is not None
    out: list[Fingerprint] = []
    for fp in inputs:
        looked = trace.listings.get(fp.path)
        if (
            looked is None
            or fp.kind is not Kind.LISTING
            or fp.names is None  # (the names it had before the run, if it changed since)
            or fp.path in trace.listed_elsewhere
        ):
            out.append(fp)
            continue
        blob = listings.entries_record(looked[0], looked[1], fp.names)
        digest = store.put_blob(blob)
        out.append(Fingerprint(fp.path, Kind.ENTRIES, digest, fp.sig, fp.verified_ns))
    return out


def by_section(inputs: list[Fingerprint], trace: Trace) -> list[Fingerprint]:
    """Turns the ``FILE`` inputs that only their reader read (a ``pyproject.toml`` by
    pytest's configuration search, an ``entry_points.txt`` by ``importlib.metadata``, a
    ``*.gz`` by ``gzip``: ``tracer/sections.py``) into ``SECTION`` inputs: fingerprinted
    by the part of them that reader takes."""
    return [as_section(fp, trace) or fp for fp in inputs]


def as_section(fp: Fingerprint, trace: Trace) -> Fingerprint | None:
    """``fp``, a ``FILE`` input, as a ``SECTION`` input if only its reader read it in the
    run (``Trace.sections``, nobody else: ``Trace.py_elsewhere``) and memotest can parse
    the file as it was fingerprinted; else None."""
    if (
        not trace.sections
        or fp.path not in trace.sections
        or fp.kind is not Kind.FILE
        or fp.link is not None
        or fp.path in trace.py_elsewhere
    ):
        return None
    try:
        with open(fp.path, "rb") as f:
            data = f.read()
    except OSError:
        return None
    digest = sections.section_digest(fp.path, data)
    if digest == sections.UNPARSED or xxhash.xxh3_128_hexdigest(data) != fp.digest:
        return None  # not what was fingerprinted, or memotest cannot parse it
    return Fingerprint(fp.path, Kind.SECTION, digest, fp.sig, fp.verified_ns)


def _bytecode_of(path: str, sources: set[str]) -> bool:
    """Whether ``path`` is the ``__pycache__`` folder or a cached bytecode file of one
    of ``sources`` (``pkg/__pycache__/mod.cpython-311.pyc`` of ``pkg/mod.py``)."""
    folder, name = os.path.split(path)
    if name == "__pycache__":
        return any(os.path.dirname(s) == folder for s in sources)
    if os.path.basename(folder) != "__pycache__" or not name.endswith(".pyc"):
        return False
    stem = name.split(".", 1)[0]
    return os.path.join(os.path.dirname(folder), stem + ".py") in sources


def _links_into_kernel_fs(path: str, states: FileStates) -> bool:
    st = states.lstat(path)
    if st is None or not stat.S_ISLNK(st.st_mode):
        return False
    return is_pseudo(os.path.realpath(path))
