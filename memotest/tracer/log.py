"""Reads the shim's trace log (format: ``memotest/_shim/PROTOCOL.md``)."""

from __future__ import annotations

import codecs
import os
import sys
from collections.abc import Iterator
from typing import NamedTuple


class Event(NamedTuple):
    """One record of the log: an op letter, the pid that wrote it, and its fields.
    (A named tuple: a log holds tens of thousands of records, and a tuple is the cheapest
    immutable object to make.)"""

    op: str
    pid: int
    fields: tuple[str, ...]

    @property
    def path(self) -> str:
        return self.fields[0]


def _whole_buffer_decode() -> bool:
    """Whether decoding the log in one piece gives what ``os.fsdecode`` gives field by
    field: true for UTF-8 (a NUL byte is never part of a multi-byte sequence)."""
    try:
        utf8 = codecs.lookup(sys.getfilesystemencoding()).name == "utf-8"
    except LookupError:
        return False
    return utf8 and sys.getfilesystemencodeerrors() == "surrogateescape"


_UTF8 = _whole_buffer_decode()


class TornLog(Exception):
    """The log ends in the middle of a record, or a record is malformed."""


def parse(data: bytes) -> Iterator[Event]:
    """Yields the events of a log in order. Raises :class:`TornLog` at a malformed record,
    after yielding every well-formed record before it."""
    if _UTF8:
        parts = data.decode("utf-8", "surrogateescape").split("\0")
    else:
        parts = [os.fsdecode(p) for p in data.split(b"\0")]
    # A last record with no terminating NUL: the log was cut short.
    tail_torn = bool(parts[-1])
    parts.pop()  # empty after the final NUL, or the torn tail
    new, event = tuple.__new__, Event
    it = iter(parts)
    for head in it:
        # Nearly every record has one field: "R4711:1" (the ':' right before the '1').
        one = head.endswith(":1")
        try:
            if one:
                pid = int(head[1:-2])
                count = 1
            else:
                pid_s, _, count_s = head[1:].partition(":")
                pid, count = int(pid_s), int(count_s)
            if not head or count < 0:
                raise ValueError
        except ValueError:
            raise TornLog(f"malformed record header {head[:40]!r}") from None
        try:
            fields = (next(it),) if one else tuple([next(it) for _ in range(count)])
        except StopIteration:
            raise TornLog("log ends inside a record") from None
        yield new(event, (head[0], pid, fields))
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
