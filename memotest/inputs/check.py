"""Recorded inputs against the file system now: whether they hold, and what changed.

Each kind checks its own fingerprints (``registry.verifiers``); these are the calls for
one recorded :class:`~memotest.model.Input` (or :class:`~memotest.world.fingerprint.Fingerprint`,
whose stat signature makes the check cheap). The no-op build's loop over thousands of
fingerprints (``plan.py``) calls the kinds' checkers directly.
"""

from __future__ import annotations

from collections.abc import Sequence

from memotest.inputs.registry import kind_of
from memotest.model import Input, Kind
from memotest.world.fingerprint import UNREADABLE, FileStates, Fingerprint, Refresh


def verify(
    states: FileStates,
    path: str,
    kind: str,
    digest: str,
    sig: Sequence[int] | None = None,
    verified_ns: int = 0,
    link: str | None = None,
) -> bool | Refresh:
    """Whether a recorded fingerprint, fields passed flat, still holds: ``True``,
    ``False``, or a :class:`~memotest.world.fingerprint.Refresh` (holds, but had to be
    re-hashed: store the new signature so the next build takes the fast path)."""
    try:
        found = kind_of(kind)
    except (KeyError, ValueError):
        return False
    return found.verify(states, path, digest, sig, verified_ns, link)


def check(states: FileStates, recorded: Input) -> bool | Refresh:
    """:func:`verify` for an :class:`~memotest.model.Input` or a
    :class:`~memotest.world.fingerprint.Fingerprint`."""
    if isinstance(recorded, Fingerprint):
        return verify(
            states,
            recorded.path,
            Kind(recorded.kind).value,
            recorded.digest,
            recorded.sig,
            recorded.verified_ns,
            recorded.link,
        )
    return verify(states, recorded.path, Kind(recorded.kind).value, recorded.digest)


def holds(states: FileStates, recorded: Input) -> bool:
    """Whether a recorded input still holds (a refresh counts as holding)."""
    return check(states, recorded) is not False


def describe_change(
    recorded: Input, states: FileStates, recorded_names: Sequence[str] | None = None
) -> str | None:
    """None if ``recorded`` still holds, else a short phrase saying what changed.

    ``recorded_names`` are the entry names a listing had (else ``recorded.names``, else
    the store's copy of them through ``states.blobs``); without them a changed listing is
    only "directory entries changed".
    """
    if check(states, recorded) is not False:
        return None
    path = recorded.path
    st = states.stat(path)
    if st is UNREADABLE:
        err = states.error(path)
        return f"is unreadable ({err.strerror if err else 'error'})"
    return kind_of(recorded.kind).describe(recorded, states, st, recorded_names)
