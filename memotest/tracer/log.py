"""Reads the shim's trace log (format: ``memotest/_shim/PROTOCOL.md``)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Event:
    """One record of the log: an op letter, the pid that wrote it, and its fields."""

    op: str
    pid: int
    fields: tuple[str, ...]

    @property
    def path(self) -> str:
        return self.fields[0]


class TornLog(Exception):
    """The log ends in the middle of a record, or a record is malformed."""


def parse(data: bytes) -> Iterator[Event]:
    """Yields the events of a log in order. Raises :class:`TornLog` at a malformed record,
    after yielding every well-formed record before it."""
    parts = data.split(b"\0")
    # A last record with no terminating NUL: the log was cut short.
    tail_torn = bool(parts and parts[-1])
    parts.pop()  # empty after the final NUL, or the torn tail
    i = 0
    n = len(parts)
    decode = os.fsdecode
    while i < n:
        head = parts[i]
        try:
            op = chr(head[0])
            pid_s, count_s = head[1:].split(b":", 1)
            pid = int(pid_s)
            count = int(count_s)
        except (IndexError, ValueError):
            raise TornLog(f"malformed record header {head[:40]!r}") from None
        if i + 1 + count > n:
            raise TornLog("log ends inside a record")
        yield Event(op, pid, tuple(decode(f) for f in parts[i + 1 : i + 1 + count]))
        i += 1 + count
    if tail_torn:
        raise TornLog("log ends inside a record")


def read(path: str) -> tuple[list[Event], str | None]:
    """All events of the log file at ``path`` and, if the log is damaged, why."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as exc:
        return [], f"trace log unreadable: {exc.strerror}"
    events: list[Event] = []
    try:
        events.extend(parse(data))
    except TornLog as exc:
        return events, f"trace log damaged: {exc}"
    return events, None
