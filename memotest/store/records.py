"""Records: what the store keeps about each target's last run (the ``records`` table).

One row per target name; storing a record replaces the previous one of that name. A
record's ``inputs`` column is a zlib-compressed array of ``fps.id`` (uint32, little endian,
sorted): records share their fingerprints (:mod:`memotest.store.fingerprints`), so 1,000
records of 2,000 inputs each cost a few MB, and checking them all means validating each
*distinct* fingerprint once and testing each record's id array against the set of invalid
ids (``set.isdisjoint`` at C speed). ``writes`` and ``rewritten`` are zlib-compressed
NUL-joined paths; ``definition``, ``env`` and ``outputs`` are JSON.

A record names blobs (its log and its declared outputs, :func:`named_blobs`) that must be in
the CAS before its row is written; it keeps them, and its fingerprints, from the GC
(:func:`live_references`).
"""

from __future__ import annotations

import json
import os
import sqlite3
import sys
import zlib
from array import array
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from memotest.model import Input
from memotest.store.damage import Garbled
from memotest.store.fingerprints import FingerprintTable, InputList, from_db, to_db
from memotest.store.outputs import split_output

#: The statuses a record can have; only ``passed`` results are reused.
STATUSES = ("passed", "failed", "timeout", "error")


def default_recorder() -> str:
    """The recorder version of this memotest (:data:`memotest.keys.RECORDER`)."""
    from memotest.keys import RECORDER

    return RECORDER


@dataclass
class Record:
    """Everything stored about one target's last run.

    ``definition``/``env`` are what ``def_hash``/``env_hash`` were computed from (env values
    are hashes, None for unset: never values in clear), so ``explain`` can name what changed.
    ``status`` is one of :data:`STATUSES`. ``cacheable`` is False when the trace could not
    prove the result reusable; ``uncacheable_reason`` says why. ``inputs`` are the
    fingerprints that must all hold for a hit. ``writes`` are the paths the target wrote or
    deleted (sorted), for the scheduler's conflict checks; ``rewritten`` those of them it had
    read before (``rewritten.py``: the next run compares them with what they were before it).
    ``log_digest`` and ``outputs``
    (declared output path -> digest) name CAS blobs, which must be stored before the record.
    ``recorder`` is the version that made the record; another version's records are stale.
    """

    name: str
    status: str
    def_hash: str = ""
    definition: dict[str, Any] = field(default_factory=dict)
    env_hash: str = ""
    env: dict[str, str | None] = field(default_factory=dict)
    exit_code: int | None = None
    duration: float = 0.0
    started_ns: int = 0
    finished_ns: int = 0
    cacheable: bool = True
    uncacheable_reason: str | None = None
    inputs: Sequence[Input] = field(default_factory=list)
    writes: list[str] = field(default_factory=list)
    log_digest: str | None = None
    outputs: dict[str, str] = field(default_factory=dict)
    rewritten: list[str] = field(default_factory=list)
    recorder: str = field(default_factory=default_recorder)
    #: The settings that shaped what it holds (:mod:`memotest.shaping`): reused only
    #: while each is still granted.
    shaping: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"record status must be one of {STATUSES}, not {self.status!r}")


_COLUMNS = (
    "name, recorder, def_hash, definition, env_hash, env, status, exit_code, duration, "
    "started_ns, finished_ns, cacheable, uncacheable_reason, inputs, writes, log_digest, outputs, "
    "rewritten, shaping"
)


def names(conn: sqlite3.Connection) -> list[str]:
    """The names of all stored records, sorted."""
    return [r[0] for r in conn.execute("SELECT name FROM records ORDER BY name")]


def count(conn: sqlite3.Connection) -> int:
    """How many records are stored."""
    return int(conn.execute("SELECT COUNT(*) FROM records").fetchone()[0])


def select(conn: sqlite3.Connection, wanted: Iterable[str] | None) -> list[tuple[Any, ...]]:
    """The rows of the records named ``wanted`` (all when None) that exist, in one query."""
    sql = f"SELECT {_COLUMNS} FROM records"
    if wanted is None:
        return conn.execute(sql).fetchall()
    unique = list(dict.fromkeys(wanted))
    if not unique:
        return []
    return conn.execute(
        sql + " WHERE name IN (SELECT value FROM json_each(?))", (json.dumps(unique),)
    ).fetchall()


def from_rows(rows: Iterable[tuple[Any, ...]], fps: FingerprintTable) -> dict[str, Record]:
    """The records of rows of :func:`select`, by name; their ``inputs`` are lazy
    :class:`~memotest.store.fingerprints.InputList` objects over ``fps``. A row that does
    not decode raises :class:`~memotest.store.damage.Garbled`."""
    out: dict[str, Record] = {}
    for r in rows:
        try:
            out[r[0]] = _from_row(r, fps)
        except (ValueError, TypeError, KeyError, IndexError, OverflowError, zlib.error) as exc:
            raise Garbled(f"record {r[0]!r} does not decode: {exc}") from None
    return out


def _from_row(r: tuple[Any, ...], fps: FingerprintTable) -> Record:
    rec = Record(
        name=r[0],
        recorder=r[1],
        def_hash=r[2],
        definition=json.loads(r[3]),
        env_hash=r[4],
        env=json.loads(r[5]),
        status=r[6],
        exit_code=r[7],
        duration=r[8],
        started_ns=r[9],
        finished_ns=r[10],
        cacheable=bool(r[11]),
        uncacheable_reason=from_db(r[12]),
        inputs=InputList(_decode_ids(r[13]), fps),
        writes=_decode_paths(r[14]),
        log_digest=r[15],
        outputs=json.loads(r[16]),
        rewritten=_decode_paths(r[17]),
        shaping=json.loads(r[18]),
    )
    if not (isinstance(rec.definition, dict) and isinstance(rec.outputs, dict)):
        raise TypeError("definition and outputs must be objects")
    return rec


def insert(conn: sqlite3.Connection, record: Record, ids: Iterable[int]) -> None:
    """Write ``record``, whose inputs are the fingerprints ``ids``, replacing the previous
    record of its name (in the caller's transaction)."""
    unique = set(ids)
    conn.execute(
        f"INSERT OR REPLACE INTO records({_COLUMNS}, n_inputs) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            record.name,
            record.recorder,
            record.def_hash,
            json.dumps(record.definition, sort_keys=True, default=str),
            record.env_hash,
            json.dumps(record.env, sort_keys=True, default=str),
            record.status,
            record.exit_code,
            float(record.duration),
            int(record.started_ns),
            int(record.finished_ns),
            int(bool(record.cacheable)),
            to_db(record.uncacheable_reason),
            _encode_ids(unique),
            _encode_paths(sorted(set(record.writes))),
            record.log_digest,
            json.dumps(record.outputs, sort_keys=True, default=str),
            _encode_paths(sorted(set(record.rewritten))),
            json.dumps(sorted(set(record.shaping))),
            len(unique),
        ),
    )


def delete(conn: sqlite3.Connection, name: str) -> bool:
    """Forget the record of ``name`` (in the caller's transaction); True if there was one."""
    return conn.execute("DELETE FROM records WHERE name = ?", (name,)).rowcount > 0


def named_blobs(log_digest: str | None, outputs: Mapping[str, str]) -> Iterator[str]:
    """The digests of the blobs a record names: its log's and its declared outputs'."""
    if log_digest:
        yield log_digest
    for value in outputs.values():
        yield split_output(value)[0]


def live_references(conn: sqlite3.Connection) -> tuple[set[int], set[str]]:
    """The fingerprint ids and the blob digests the stored records name (what GC keeps)."""
    fps: set[int] = set()
    blobs: set[str] = set()
    for inputs, log_digest, outputs in conn.execute(
        "SELECT inputs, log_digest, outputs FROM records"
    ):
        fps.update(_decode_ids(inputs))
        blobs.update(named_blobs(log_digest, json.loads(outputs)))
    return fps, blobs


def _encode_ids(ids: Iterable[int]) -> bytes:
    arr = array("I", sorted(set(ids)))
    if sys.byteorder == "big":  # pragma: no cover
        arr.byteswap()
    return zlib.compress(arr.tobytes(), 6)


def _decode_ids(blob: bytes) -> array[int]:
    arr = array("I")
    arr.frombytes(zlib.decompress(blob))
    if sys.byteorder == "big":  # pragma: no cover
        arr.byteswap()
    return arr


def _encode_paths(paths: Iterable[str]) -> bytes:
    return zlib.compress(b"\0".join(os.fsencode(p) for p in paths), 6)


def _decode_paths(blob: bytes) -> list[str]:
    raw = zlib.decompress(blob)
    return [os.fsdecode(p) for p in raw.split(b"\0")] if raw else []
