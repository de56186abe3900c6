"""Records: what the store keeps about each target's runs (the ``records`` table).

Many rows per target name, its *variants* (ccache's direct-mode manifests are the model):
each is one recorded run, with the fingerprints it needs and its result, so that a branch
switched back to, a bisect or a rebase finds the result of a state seen before
(:func:`memotest.check.plan.plan` picks the one that holds). Storing a record adds a variant and
replaces any variant of the same name with the same key (``recorder``, ``def_hash``,
``env_hash``, ``shaping``) and the same input id array: the same observations never keep
two results (a flaky test's fail replaces its pass). Each name keeps at most
:data:`MAX_VARIANTS`, the least recently used going first; ``last_used_ns`` (set when
recorded, and when replayed: :func:`mark_used`) orders that and the store's size bound
(:mod:`memotest.store.gc`). "Newest" is the latest ``finished_ns`` (then the latest id).

A record's ``inputs`` column is a zlib-compressed array of ``fps.id`` (uint32, little endian,
sorted: :mod:`memotest.store.idarrays`): records share their fingerprints
(:mod:`memotest.store.fingerprints`), so 1,000 records of 2,000 inputs each cost a few MB,
and checking them all means validating each *distinct* fingerprint once and testing each
record's id array against the set of invalid ids (:mod:`memotest.check.holds`). ``writes`` and
``rewritten`` are zlib-compressed NUL-joined paths; ``definition``, ``env``, ``outputs``: JSON.

A record names blobs (its log, its declared outputs and its per-test results,
:func:`named_blobs`) that must be in
the CAS before its row is written; it keeps them, and its fingerprints, from the GC
(:func:`live_references`).
"""

from __future__ import annotations

import json
import os
import sqlite3
import zlib
from array import array
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from memotest import RECORDER
from memotest.model import Input
from memotest.store import idarrays
from memotest.store.damage import Garbled
from memotest.store.fingerprints import FingerprintTable, from_db, to_db
from memotest.store.idarrays import InputList
from memotest.store.outputs import split_output

#: The statuses a record can have; only ``passed`` results are reused (a ``skipped`` run,
#: one that said it did not do its work, is never replayed: :mod:`memotest.run.runner`).
STATUSES = ("passed", "failed", "timeout", "error", "skipped")

#: The variants kept per target name: enough for a few branches, a bisect's states and a
#: flaky history, while a target whose inputs change at every commit stays bounded.
MAX_VARIANTS = 8


def default_recorder() -> str:
    """The recorder version of this memotest (:data:`memotest.RECORDER`)."""
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
    #: The settings that shaped what it holds (:mod:`memotest.check.shaping`): reused only
    #: while each is still granted.
    shaping: list[str] = field(default_factory=list)
    #: The CAS blob of the run's per-test results (``memotest/run/testcases.py``: read with
    #: ``Store.read_blob`` and ``testcases.decode``), None when it reported none.
    tests_digest: str | None = None
    #: The CAS blob of the code each test of the run depended on (a test runner's
    #: plugin labelled them: ``memotest/recording/parts.py``), or None. A record without it is
    #: never run in part.
    parts: str | None = None
    #: Which stored variant this is (the row's id), None for a record not read from a store.
    variant_id: int | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"record status must be one of {STATUSES}, not {self.status!r}")


_COLUMNS = (
    "name, recorder, def_hash, definition, env_hash, env, status, exit_code, duration, "
    "started_ns, finished_ns, cacheable, uncacheable_reason, inputs, writes, log_digest, outputs, "
    "rewritten, shaping, tests_digest, parts"
)
_SELECTED = "id, " + _COLUMNS


_NEWEST = "finished_ns DESC, id DESC"


class Head(NamedTuple):
    """The few columns of a variant that say whether it is a candidate for a target's key
    (:func:`heads`): cheap to read for every variant of a build's targets."""

    id: int
    name: str
    recorder: str
    def_hash: str
    env_hash: str
    shaping: str  # JSON, as stored
    finished_ns: int
    last_used_ns: int


def names(conn: sqlite3.Connection) -> list[str]:
    """The names that have records, sorted."""
    return [r[0] for r in conn.execute("SELECT DISTINCT name FROM records ORDER BY name")]


def count(conn: sqlite3.Connection) -> int:
    """How many records (variants) are stored."""
    return int(conn.execute("SELECT COUNT(*) FROM records").fetchone()[0])


def _where_names(sql: str, wanted: Iterable[str] | None, order: str) -> tuple[str, tuple]:
    if wanted is None:
        return f"{sql} ORDER BY {order}", ()
    unique = json.dumps(list(dict.fromkeys(wanted)))
    return f"{sql} WHERE name IN (SELECT value FROM json_each(?)) ORDER BY {order}", (unique,)


def select(conn: sqlite3.Connection, wanted: Iterable[str] | None) -> list[tuple[Any, ...]]:
    """The rows of the newest variant of each name in ``wanted`` (all when None)."""
    sql, args = _where_names(f"SELECT {_SELECTED} FROM records", wanted, f"name, {_NEWEST}")
    out: list[tuple[Any, ...]] = []
    for r in conn.execute(sql, args):
        if not out or out[-1][1] != r[1]:
            out.append(r)
    return out


def select_ids(conn: sqlite3.Connection, ids: Iterable[int]) -> list[tuple[Any, ...]]:
    """The rows of the variants ``ids`` that exist."""
    return conn.execute(
        f"SELECT {_SELECTED} FROM records WHERE id IN (SELECT value FROM json_each(?))",
        (json.dumps(sorted(set(ids))),),
    ).fetchall()


def heads(conn: sqlite3.Connection, wanted: Iterable[str] | None) -> dict[str, list[Head]]:
    """Every variant of the names ``wanted`` (all when None) as a :class:`Head`, by name,
    newest first."""
    sql, args = _where_names(
        "SELECT id, name, recorder, def_hash, env_hash, shaping, finished_ns, last_used_ns "
        "FROM records",
        wanted,
        f"name, {_NEWEST}",
    )
    out: dict[str, list[Head]] = {}
    for r in conn.execute(sql, args):
        out.setdefault(r[1], []).append(Head._make(r))
    return out


def mark_used(conn: sqlite3.Connection, ids: Iterable[int], now_ns: int) -> None:
    """Set the variants ``ids`` as used at ``now_ns`` (in the caller's transaction)."""
    conn.execute(
        "UPDATE records SET last_used_ns = ? WHERE id IN (SELECT value FROM json_each(?))",
        (now_ns, json.dumps(sorted(set(ids)))),
    )


def from_rows(rows: Iterable[tuple[Any, ...]], fps: FingerprintTable) -> dict[str, Record]:
    """The records of rows of :func:`select`, by name (the first row of a name wins)."""
    out: dict[str, Record] = {}
    for rec in decode(rows, fps):
        out.setdefault(rec.name, rec)
    return out


def decode(
    rows: Iterable[tuple[Any, ...]], fps: FingerprintTable, lazy: bool = False
) -> Iterator[Record]:
    """The records of rows of :func:`select` or :func:`select_ids`; their ``inputs`` are
    lazy :class:`~memotest.store.idarrays.InputList` objects over ``fps``. A row that
    does not decode raises :class:`~memotest.store.damage.Garbled`; with ``lazy``, its
    id array is only decompressed when asked for (:meth:`.Store.input_ids`).

    The ``env`` column is decoded once per distinct text (every target of a build has
    the same environment, and its JSON is the largest part of a row), each record
    getting its own copy."""
    envs: dict[str, dict[str, Any]] = {}
    for r in rows:
        try:
            yield _from_row(r[1:], fps, r[0], lazy, envs)
        except (ValueError, TypeError, KeyError, IndexError, OverflowError, zlib.error) as exc:
            raise Garbled(f"record {r[1]!r} does not decode: {exc}") from None


def _from_row(
    r: tuple[Any, ...],
    fps: FingerprintTable,
    variant_id: int,
    lazy: bool,
    envs: dict[str, dict[str, Any]],
) -> Record:
    env = envs.get(r[5])
    if env is None:
        env = envs[r[5]] = json.loads(r[5])
    rec = Record(
        variant_id=variant_id,
        name=r[0],
        recorder=r[1],
        def_hash=r[2],
        definition=json.loads(r[3]),
        env_hash=r[4],
        env=dict(env) if isinstance(env, dict) else env,
        status=r[6],
        exit_code=r[7],
        duration=r[8],
        started_ns=r[9],
        finished_ns=r[10],
        cacheable=bool(r[11]),
        uncacheable_reason=from_db(r[12]),
        inputs=InputList(None, fps, r[13]) if lazy else InputList(idarrays.decode(r[13]), fps),
        writes=_decode_paths(r[14]),
        log_digest=r[15],
        outputs=json.loads(r[16]),
        rewritten=_decode_paths(r[17]),
        shaping=json.loads(r[18]),
        tests_digest=r[19],
        parts=r[20],
    )
    if not (isinstance(rec.definition, dict) and isinstance(rec.outputs, dict)):
        raise TypeError("definition and outputs must be objects")
    return rec


def insert(conn: sqlite3.Connection, record: Record, ids: Iterable[int], now_ns: int) -> int:
    """Add ``record``, whose inputs are the fingerprints ``ids``, as a variant of its name
    used at ``now_ns``, replacing the variant of the same key and inputs and the least
    recently used ones beyond :data:`MAX_VARIANTS` (in the caller's transaction). Returns
    its id."""
    unique = set(ids)
    encoded = idarrays.encode(unique)
    shaping = json.dumps(sorted(set(record.shaping)))
    same_key = conn.execute(
        "SELECT id, inputs FROM records WHERE name = ? AND recorder = ? AND def_hash = ? "
        "AND env_hash = ? AND shaping = ?",
        (record.name, record.recorder, record.def_hash, record.env_hash, shaping),
    ).fetchall()
    sorted_ids = array("I", sorted(unique))
    for vid, inputs in same_key:
        if inputs == encoded or idarrays.decode(inputs) == sorted_ids:
            conn.execute("DELETE FROM records WHERE id = ?", (vid,))
    cur = conn.execute(
        f"INSERT INTO records({_COLUMNS}, n_inputs, last_used_ns) "
        f"VALUES ({', '.join('?' * (_COLUMNS.count(',') + 3))})",
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
            encoded,
            _encode_paths(sorted(set(record.writes))),
            record.log_digest,
            json.dumps(record.outputs, sort_keys=True, default=str),
            _encode_paths(sorted(set(record.rewritten))),
            shaping,
            record.tests_digest,
            record.parts,
            len(unique),
            now_ns,
        ),
    )
    new_id = int(cur.lastrowid or 0)
    extra = conn.execute(
        "SELECT id FROM records WHERE name = ? AND id != ? "
        "ORDER BY last_used_ns DESC, id DESC LIMIT -1 OFFSET ?",
        (record.name, new_id, MAX_VARIANTS - 1),
    ).fetchall()
    conn.executemany("DELETE FROM records WHERE id = ?", extra)
    return new_id


def delete(conn: sqlite3.Connection, name: str) -> bool:
    """Forget every variant of ``name`` (in the caller's transaction); True if there was one."""
    return conn.execute("DELETE FROM records WHERE name = ?", (name,)).rowcount > 0


def named_blobs(
    log_digest: str | None, outputs: Mapping[str, str], *others: str | None
) -> Iterator[str]:
    """The digests of the blobs a record names: its log's, its declared outputs' and the
    ``others`` (its per-test results', its per-test code map)."""
    if log_digest:
        yield log_digest
    yield from (d for d in others if d)
    for value in outputs.values():
        yield split_output(value)[0]


def live_references(conn: sqlite3.Connection) -> tuple[set[int], set[str]]:
    """The fingerprint ids and the blob digests the stored records name (what GC keeps)."""
    fps: set[int] = set()
    blobs: set[str] = set()
    for inputs, log_digest, outputs, tests_digest, parts in conn.execute(
        "SELECT inputs, log_digest, outputs, tests_digest, parts FROM records"
    ):
        fps.update(idarrays.decode(inputs))
        blobs.update(named_blobs(log_digest, json.loads(outputs), tests_digest, parts))
    return fps, blobs


def _encode_paths(paths: Iterable[str]) -> bytes:
    return zlib.compress(b"\0".join(os.fsencode(p) for p in paths), 6)


def _decode_paths(blob: bytes) -> list[str]:
    raw = zlib.decompress(blob)
    return [os.fsdecode(p) for p in raw.split(b"\0")] if raw else []
