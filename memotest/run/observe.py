"""From a trace to its observations: which paths are inputs (and of which kind, as
traced), which are written, and every reason the result may not be reused.

An observation is an input unless it is the target's own doing (a path it wrote before
reading is in ``Trace.writes`` only), a kernel file system (``/proc``, ``/sys``, ``/dev``
but ``/dev/shm``, already dropped by the tracer, which names the files reached through
them), the store, the target's private TMPDIR, or matches an
``ignore`` pattern. Which paths of a trace are inputs of which kind, each kind says
(``memotest/inputs/``). A result is not reusable when the trace is incomplete, when the
target used the network beyond the servers its own tree started (``memotest/world/services.py``:
an endpoint it did not serve and the user did not declare in ``services``) or deleted a
file it did not create.

The build's file-system snapshot (:func:`file_states`) leaves the ignored paths out of
directory listings, by the same rules.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING

from memotest.inputs.registry import KINDS
from memotest.model import Kind, Trace
from memotest.store import STORE_DIR
from memotest.world.fingerprint import FileStates
from memotest.world.network import network_reasons

if TYPE_CHECKING:
    from memotest.load.config import Project


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
        self._folders(tuple(f.rstrip("/") for f in folders if f.strip("/")))
        self._seen: dict[str, bool] = {}  # pattern matches: paths come back target after target

    def _folders(self, folders: tuple[str, ...]) -> None:
        self.folders = folders
        self._inside = tuple(f + "/" for f in folders)  # what is below one of them
        self._exact = frozenset(folders)

    def also(self, *folders: str) -> Ignore:
        """This matcher plus more folders (a target's private ``TMPDIR``); the two share
        the patterns and what they already matched."""
        other = Ignore((), self.root)
        other.abs, other.rel, other._seen = self.abs, self.rel, self._seen
        other._folders(self.folders + tuple(f.rstrip("/") for f in folders if f.strip("/")))
        return other

    def __call__(self, path: str) -> bool:
        if path.startswith(self._inside) or path in self._exact:
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


def observe(trace: Trace, ignore: Ignore, *, services: Sequence[str] = ()) -> Observations:
    """Classifies a trace's observations into inputs and writes, and collects every reason
    the result may not be reused. ``services``: the endpoints the user declared."""
    obs = Observations()
    why = obs.uncacheable
    if not trace.complete:
        first = trace.incomplete[0]
        who = f" (pid {first.pid}, {first.exe})" if first.pid else ""
        more = f" and {len(trace.incomplete) - 1} more" if len(trace.incomplete) > 1 else ""
        why.append(f"trace incomplete: {first.reason}{who}{more}")
    why.extend(
        network_reasons(trace.connects, trace.listens, trace.accepted, trace.sockets, services)
    )
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
    for each in KINDS:
        for path in each.observed(trace):
            if (path, each.kind) not in added and not ignore(path):
                added.add((path, each.kind))
    obs.inputs = sorted(added)
    return obs


def file_states(project: Project) -> FileStates:
    """A build's file-system snapshot; ignored paths are left out of directory listings."""
    ignore = Ignore(
        project.settings.ignore, str(project.root), folders=[str(project.root / STORE_DIR)]
    )
    return FileStates(skip_entry=ignore)
