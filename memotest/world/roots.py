"""The roots records are relative to, so that a copy of a project at another path replays.

A record names paths: its inputs' (the ``paths`` table), what it wrote and rewrote, and
its key names more (the target's folder, the paths in its command, the values of the
passed variables such as ``PATH`` and ``VIRTUAL_ENV``). Stored as they are, they tie the
record to one absolute place: a clone at ``/home/b/proj`` of ``/home/a/proj`` would re-run
everything. :class:`Roots` makes them portable: a path under a root is stored as
``@NAME/rest`` (``@project/src/a.py``, ``@venv/lib/python3.12/site-packages/x.py``), the
deepest root winning, and read back against where that root is on this machine.

The roots are the project root (the targets file's folder, named ``project``) and the
ones the user names in ``[settings] roots`` (:func:`load_roots`: environment variables and
paths relative to the project root expanded; a root that does not exist, or is ``/``, is a
load error). Each is matched by its real path and by its absolute spelling when the two
differ (a root reached through a symbolic link); read back, it is its real path. Paths
outside every root (the system Python, ``/usr/lib``) stay absolute: on another machine
they hold only where the same files are at the same place.

A path with ``..`` in it is resolved before it is taken under a root
(:func:`sound_normpath`): ``/a/proj/../elsewhere`` is ``/a/elsewhere``, outside the project,
and stays absolute, so a copy of the project at another depth, whose ``../elsewhere`` is
another folder, has another key. A ``..`` is resolved lexically only after a component that
is a folder and not a symbolic link (``link/..`` is the parent of the link's target, not
the folder holding the link); where that cannot be said (a symbolic link, a path that does
not exist), the path stays as written, absolute, and a copy elsewhere re-runs.

Both directions are injective: a stored path that starts with ``@`` (never an absolute
one) is escaped as ``@@``, and :meth:`Roots.portable_text` (paths embedded in text: a
command, a variable's value) escapes every ``@`` of the text first. Each conversion is
cached per distinct path or text, so the no-op path pays a dict lookup per distinct path.

Where the conversion happens: the store converts at its boundary (``store/portable.py``),
and the key (:mod:`memotest.check.keys`) is computed from portable forms; no other module knows.
What a test can still see of its absolute place is in ``docs/limits.md``.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Mapping
from pathlib import Path

#: The name of the project root, always a root.
PROJECT = "project"

#: What a root's name may be.
NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_.\-]*$")

#: What ends a path in text (a command, a variable's value): a separator, the end, or a
#: character no file name in a command or a variable is likely to go on with. A root's
#: path is that path only when followed by ``/`` or one of them (not ``/a/proj2``).
_STOP = r"\s:;,=\"'`)\]}|&<>"


def sound_normpath(path: str) -> str | None:
    """``path`` (absolute) with its empty, ``.`` and ``..`` components resolved lexically,
    where that names what the kernel would: a ``..`` cancels the component before it only
    when that is a folder and not a symbolic link (``lstat``); None when one is not (the
    path then means what only the file system can say)."""
    if "." not in path and "//" not in path:
        return path
    out: list[str] = []
    for part in path.split("/"):
        if part in ("", "."):
            continue
        if part != "..":
            out.append(part)
            continue
        if not out:
            continue  # "/.." is "/"
        try:
            mode = os.lstat("/" + "/".join(out)).st_mode
        except (OSError, ValueError):
            return None
        if not stat.S_ISDIR(mode):
            return None
        out.pop()
    return "/" + "/".join(out)


def _dotdot(path: str) -> bool:
    """Whether ``path`` has a ``..`` component."""
    return "/.." in path and ".." in path.split("/")


class Roots:
    """The roots of one project on this machine (``name -> absolute path``)."""

    def __init__(self, project: str | os.PathLike[str], named: Mapping[str, str] | None = None):
        pairs = [(PROJECT, os.fspath(project)), *(named or {}).items()]
        #: name -> real path (what a stored path is read back against).
        self.paths: dict[str, str] = {}
        spellings: list[tuple[str, str, int]] = []
        for order, (name, path) in enumerate(pairs):
            real = os.path.realpath(path)
            self.paths[name] = real
            for spelling in dict.fromkeys((real, os.path.abspath(path))):
                # abspath drops ``link/..`` as text: a spelling only if it is the root.
                if spelling != "/" and os.path.realpath(spelling) == real:
                    spellings.append((spelling, name, order))
        # Deepest first; at the same depth, the one named last (a named root over project).
        spellings.sort(key=lambda s: (-len(s[0]), -s[2]))
        self._spellings = [(s, n) for s, n, _ in spellings]
        alternatives = "|".join(re.escape(s) for s, _ in self._spellings)
        self._text_re = re.compile(
            f"@|(?P<root>{alternatives})(?P<rest>/[^{_STOP}]*)?(?=[{_STOP}]|$)"
            if alternatives
            else "@"
        )
        self._by_spelling = dict(self._spellings)
        self._to: dict[str, str] = {}
        self._from: dict[str, str] = {}
        self._texts: dict[str, str] = {}
        self._sql: dict[tuple[str, str], tuple[str, tuple[str, ...]]] = {}

    def names(self) -> list[str]:
        """The roots' names, sorted (part of every key: a record made with a root
        that is no longer one, or under another name, is not reused)."""
        return sorted(self.paths)

    def portable(self, path: str) -> str:
        """``path`` as stored: ``@NAME/rest`` under a root, else itself (``@`` escaped)."""
        out = self._to.get(path)
        if out is None:
            out = self._to[path] = self._portable(path)
        return out

    def _portable(self, path: str) -> str:
        if _dotdot(path):
            resolved = sound_normpath(path) if path.startswith("/") else None
            if resolved is None:  # as written: absolute, this machine's
                return "@" + path if path.startswith("@") else path
            path = resolved
        for spelling, name in self._spellings:
            if path == spelling:
                return "@" + name
            if path.startswith(spelling) and path[len(spelling)] == "/":
                return "@" + name + path[len(spelling) :]
        return "@" + path if path.startswith("@") else path

    def local(self, stored: str) -> str:
        """A stored path (:meth:`portable`) as a path on this machine. A root this
        project does not name is left as stored (nothing holds there: such a record's
        key differs anyway, :meth:`names`)."""
        out = self._from.get(stored)
        if out is None:
            out = self._from[stored] = self._local(stored)
        return out

    def _local(self, stored: str) -> str:
        if not stored.startswith("@"):
            return stored
        if stored.startswith("@@"):
            return stored[1:]
        name, sep, rest = stored[1:].partition("/")
        root = self.paths.get(name)
        if root is None:
            return stored
        return root + sep + rest if root != "/" else "/" + rest

    def sql_local(self, query: str, column: str) -> tuple[str, tuple[str, ...]]:
        """``query`` with ``{path}`` replaced by an SQL expression that gives the stored
        path ``column`` as :meth:`local` would, for the roots whose path is text (the
        no-op path then converts in SQLite), and its parameters; what it leaves as
        stored starts with ``@``, and :meth:`local` does it."""
        key = (query, column)
        found = self._sql.get(key)
        if found is None:
            whens, params = [], []
            for name, path in self.paths.items():
                if path != "/" and _utf8(path):
                    n = len(name) + 1
                    whens.append(
                        f"WHEN substr({column}, 1, {n + 1}) = '@{name}/' OR {column} = '@{name}'"
                        f" THEN ? || substr({column}, {n + 1})"
                    )
                    params.append(path)
            expr = f"CASE {' '.join(whens)} ELSE {column} END" if whens else column
            found = self._sql[key] = (query.format(path=expr), tuple(params))
        return found

    def portable_text(self, text: str) -> str:
        """``text`` with each root's path in it (followed by a separator or the end) put
        as ``@NAME`` and each ``@`` as ``@@``: the form a key is computed from."""
        out = self._texts.get(text)
        if out is None:
            if "@" not in text and not any(s in text for s, _ in self._spellings):
                out = text
            else:
                out = self._text_re.sub(self._replace, text)
            self._texts[text] = out
        return out

    def _replace(self, m: re.Match[str]) -> str:
        found = m.group(0)
        if found == "@":
            return "@@"
        root, rest = m.group("root"), m.group("rest") or ""
        if not _dotdot(rest):
            return "@" + self._by_spelling[root] + rest.replace("@", "@@")
        # ``..`` first: ``/a/proj/../elsewhere`` is not under the project.
        resolved = sound_normpath(found)
        if resolved is None:
            return found.replace("@", "@@")  # as written: this machine's
        path = self.portable(resolved)
        if path.startswith("@") and not path.startswith("@@"):
            name, sep, tail = path[1:].partition("/")
            return "@" + name + sep + tail.replace("@", "@@")
        return resolved.replace("@", "@@")


def _utf8(path: str) -> bool:
    """Whether ``path`` is text (no byte ``os.fsdecode`` escaped), so SQLite can hold it."""
    return not any("\udc80" <= c <= "\udcff" for c in path)


def load_roots(
    raw: Mapping[str, object], project: Path, environ: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The ``[settings] roots`` table as ``name -> absolute path``: ``$VAR`` and
    ``${VAR}`` expanded from ``environ``, relative paths against ``project``. Raises
    :class:`ValueError` with what is wrong (a bad name, an unset variable, a root that
    is not a folder or is ``/``)."""
    env = os.environ if environ is None else environ
    out: dict[str, str] = {}
    for name, value in raw.items():
        if not NAME_RE.fullmatch(name) or name == PROJECT:
            raise ValueError(
                f"root name {name!r} is not valid (letters, digits, _ . -; not {PROJECT!r})"
            )
        if not isinstance(value, str) or not value:
            raise ValueError(f"root {name!r} must be a path (a string)")
        unset = [v for v in re.findall(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?", value) if v not in env]
        if unset:
            raise ValueError(f"root {name!r} uses ${unset[0]}, which is not set")
        expanded = re.sub(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?", lambda m: env[m.group(1)], value)
        joined = os.path.join(os.path.abspath(project), os.path.expanduser(expanded))
        path = sound_normpath(joined) or os.path.realpath(joined)  # "tools/../x": no link
        if not os.path.isdir(path):
            raise ValueError(f"root {name!r} is {path}, which is not a folder")
        if os.path.realpath(path) == "/":
            raise ValueError(f"root {name!r} is /: every path would be under it")
        out[name] = path
    return out


def of(root: str | os.PathLike[str], named: Mapping[str, str] | None) -> Roots:
    """The roots of a project whose targets file is in ``root`` (cached per process: the
    conversions' caches are then shared by whoever asks)."""
    key = (os.fspath(root), tuple(sorted((named or {}).items())))
    found = _CACHE.get(key)
    if found is None:
        found = _CACHE[key] = Roots(root, named)
    return found


_CACHE: dict[tuple[str, tuple[tuple[str, str], ...]], Roots] = {}
