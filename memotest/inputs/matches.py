"""``glob``: a declared input that is a glob pattern, by the set of paths it matches.

``inputs = ["data/*.csv"]`` in a targets file holds by *which* paths match (a new match,
or one that went, re-runs the target) and, through the inputs :func:`declared` adds for
each match, by their contents. A declared folder holds by its entries, recursively: a
``list`` input for it and every folder below it (names), and a ``file`` input for every
file (contents), so a file added or edited anywhere inside re-runs the target. Entries
the build ignores (``settings.ignore``) are left out, as in any listing.

The pattern's digest is the xxh3-128 of the matching paths (file-system bytes, sorted,
``\\0``-joined): the CAS blob of those names, which ``explain`` compares with the matches
now. A pattern is any declared input holding ``*``, ``?`` or ``[``; a path that exists
literally under that name counts as a match too, so a file named ``x[1].txt`` declared as
is stays an input (a loader that means a literal name escapes it, ``glob.escape``).
Symbolic links to folders are fingerprinted as what they point to, not walked into.
"""

from __future__ import annotations

import glob
import os
import stat
from collections.abc import Sequence

from memotest.inputs.base import InputKind, names_phrase
from memotest.inputs.listing import recorded_entries
from memotest.model import Input, Kind
from memotest.world.fingerprint import FileStates, Fingerprint, Refresh
from memotest.world.observable import listing_digest


def matches(pattern: str, skip: object = None) -> list[str]:
    """The absolute paths matching ``pattern`` (absolute; ``**`` spans folders), sorted,
    the literal path among them when it exists, ignored paths left out."""
    found = set(glob.glob(pattern, recursive=True))
    if os.path.lexists(pattern):
        found.add(pattern)
    if callable(skip):
        found = {p for p in found if not skip(p)}
    return sorted(os.path.normpath(p) for p in found)


def _fingerprint(pattern: str, states: FileStates) -> Fingerprint:
    names = matches(pattern, states.skip_entry)
    digest, _ = listing_digest(os.fsencode(n) for n in names)
    return Fingerprint(pattern, Kind.GLOB, digest, names=tuple(names))


class Matches(InputKind):
    kind = Kind.GLOB
    blob = True  # the digest names the CAS blob of the matching paths

    def verify(
        self,
        states: FileStates,
        path: str,
        digest: str,
        sig: Sequence[int] | None,
        verified_ns: int,
        link: str | None,
    ) -> bool | Refresh:
        return _fingerprint(path, states).digest == digest

    def describe(
        self,
        recorded: Input,
        states: FileStates,
        st: os.stat_result | None,
        names: Sequence[str] | None,
    ) -> str | None:
        if names is None and isinstance(recorded, Fingerprint):
            names = recorded.names
        if names is None:
            names = recorded_entries(states, recorded.digest)[0]
        now = matches(recorded.path, states.skip_entry)
        if names is None:
            return "the paths matching it changed"
        old, new = set(names), set(now)
        gained, lost = sorted(new - old), sorted(old - new)
        parts = [names_phrase("new matches", gained)] if gained else []
        parts += [names_phrase("matches gone", lost)] if lost else []
        return "; ".join(parts) or "the paths matching it changed"


KIND = Matches()


def declared(
    target_cwd: str, inputs: Sequence[str], states: FileStates
) -> tuple[list[Fingerprint], list[str]]:
    """The fingerprints of a target's declared ``inputs`` (relative to ``target_cwd``),
    taken right after its run: a pattern by its matches and each match, a folder by its
    entries recursively, anything else as the path is; and why the result may not be
    reused (a path that cannot be fingerprinted)."""
    out: list[Fingerprint] = []
    why: list[str] = []
    for extra in inputs:
        path = os.path.normpath(os.path.join(target_cwd, extra))
        if glob.has_magic(extra):
            fp = _fingerprint(path, states)
            out.append(fp)
            paths: Sequence[str] = fp.names or ()
        else:
            paths = (path,)
        for p in paths:
            try:
                _expand(p, states, out, set())
            except OSError as exc:
                why.append(f"cannot fingerprint declared input {p}: {exc.strerror or exc}")
    return out, why


def _expand(path: str, states: FileStates, out: list[Fingerprint], seen: set[str]) -> None:
    """``path`` fingerprinted: a folder (not a link to one) as its listing and, in turn,
    every entry of it; anything else by what it is."""
    states.forget([path])
    st = states.lstat(path)
    if isinstance(st, os.stat_result) and stat.S_ISDIR(st.st_mode) and path not in seen:
        seen.add(path)
        listing = states.fingerprint(path, Kind.LISTING, fresh=True)
        out.append(listing)
        for name in listing.names or ():
            _expand(os.path.join(path, name), states, out, seen)
        return
    out.append(states.fingerprint(path, fresh=True))
