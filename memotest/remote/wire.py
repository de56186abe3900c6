"""What travels to and from a remote cache, and how it is signed.

Three things, all JSON, all versioned (``"memotest": "record/1"``, ``"manifest/1"``):

- a **record** (:func:`dump_record`, :func:`load_record`): a :class:`~memotest.store.Record`
  with its inputs as ``[path, kind, digest, link]`` and, for every local blob it names (its
  log, its declared outputs, the digests of the input kinds that name blobs), the sha256
  that blob travels under. Stored as a CAS blob (its key is the sha256 of its bytes), in an
  envelope holding the payload and its signature.
- a **manifest** (:func:`dump_manifest`, :func:`load_manifest`): the AC entry of a target's
  key, the records uploaded for it, newest first, at most :data:`MANIFEST_LIMIT`; merged on
  upload (:func:`merge`), so a lost race loses an entry and never corrupts one.
- a **key** (:func:`ac_key`): a target's name, ``def_hash``, ``env_hash``, the settings
  that may shape its record and the recorder: what the local store keys a record by.

Signatures (:class:`Signer`): with ``MEMOTEST_REMOTE_KEY`` set, records and manifests are
signed with HMAC-SHA256 on upload, and on download one whose signature is missing or does
not verify is :class:`Untrusted`. Each signature covers a domain tag, so a record's cannot
pass for a manifest's, and a manifest's covers its AC key, so it cannot be moved to another
target. A record's sha256s make its signature cover its log, outputs and blobs too.

Every path of a record travels portable (:mod:`memotest.world.roots`: ``@project/src/a.py``),
made so on the way out and this machine's on the way in with the roots of the store it
comes from and goes to, so a record replays on a machine whose checkout is elsewhere.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from memotest.check.keys import TargetKey
from memotest.model import Kind
from memotest.store import Record
from memotest.world.fingerprint import Fingerprint
from memotest.world.roots import Roots

RECORD_FORMAT = "record/1"
MANIFEST_FORMAT = "manifest/1"
#: How many records a manifest lists for one key (the newest).
MANIFEST_LIMIT = 8


class Garbage(ValueError):
    """Bytes from the remote that are not what they claim to be."""


class Untrusted(ValueError):
    """A signature that is missing or does not verify, while a key is set."""


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def ac_key(name: str, key: TargetKey, recorder: str) -> str:
    """The AC key of a target: what the local store keys its records by, hashed."""
    shaping = sorted(key.shaping) if key.shaping is not None else None
    parts = [MANIFEST_FORMAT, name, key.def_hash, key.env_hash, shaping, recorder]
    return sha256(json.dumps(parts).encode())


class Signer:
    """HMAC-SHA256 with the key of ``MEMOTEST_REMOTE_KEY`` (none: nothing signed or checked)."""

    def __init__(self, key: str | None) -> None:
        if key is not None and not key:
            raise ValueError("an empty key signs nothing")  # never "no key"
        self.key = key.encode() if key is not None else None

    def sign(self, domain: str, data: bytes) -> str | None:
        if self.key is None:
            return None
        return hmac.new(self.key, domain.encode() + b"\0" + data, hashlib.sha256).hexdigest()

    def check(self, domain: str, data: bytes, sig: object) -> None:
        """:class:`Untrusted` unless ``sig`` signs ``data`` (no key: anything goes)."""
        if self.key is None:
            return
        if not isinstance(sig, str):
            raise Untrusted(f"unsigned {domain.split('/')[0]}")
        if not hmac.compare_digest(sig, self.sign(domain, data) or ""):
            raise Untrusted(f"{domain.split('/')[0]} signed with another key")


@dataclass
class Travelled:
    """A record as it came from the remote: ``blobs`` maps each local (xxh3) digest it
    names to the sha256 it travels under; ``inputs_blobs`` those its inputs name."""

    record: Record
    blobs: dict[str, str]
    input_blobs: set[str]


def dump_record(record: Record, blobs: Mapping[str, str], signer: Signer, roots: Roots) -> bytes:
    """The envelope of ``record`` (its inputs materialized), ``blobs`` as for
    :class:`Travelled`, its paths portable under ``roots``."""
    portable = roots.portable
    payload = {
        "name": record.name,
        "status": record.status,
        "def_hash": record.def_hash,
        "definition": record.definition,
        "env_hash": record.env_hash,
        "env": record.env,
        "exit_code": record.exit_code,
        "duration": record.duration,
        "started_ns": record.started_ns,
        "finished_ns": record.finished_ns,
        "cacheable": record.cacheable,
        "uncacheable_reason": record.uncacheable_reason,
        "recorder": record.recorder,
        "shaping": sorted(record.shaping),
        "writes": [portable(p) for p in record.writes],
        "rewritten": [portable(p) for p in record.rewritten],
        "log": record.log_digest,
        "tests": record.tests_digest,
        "outputs": record.outputs,
        "inputs": [
            [portable(i.path), Kind(i.kind).value, i.digest, getattr(i, "link", None)]
            for i in record.inputs
        ],
        "blobs": dict(blobs),
    }
    return seal(RECORD_FORMAT, json.dumps(payload, sort_keys=True, default=str).encode(), signer)


def seal(fmt: str, text: bytes, signer: Signer, domain: str | None = None) -> bytes:
    """The signed envelope of the payload ``text`` of format ``fmt`` (signed as ``domain``,
    by default ``fmt``): ``{"memotest": fmt, "payload": text, "sig": ...}``."""
    sig = signer.sign(domain or fmt, text)
    return json.dumps({"memotest": fmt, "payload": text.decode(), "sig": sig}).encode()


def unseal(data: bytes, fmt: str, signer: Signer, domain: str | None = None) -> bytes:
    """The payload of a :func:`seal`'ed envelope: :class:`Garbage` if it is not one of
    ``fmt``, :class:`Untrusted` if its signature does not verify."""
    what = fmt.split("/")[0]
    try:
        env = json.loads(data)
        if env.get("memotest") != fmt or not isinstance(env.get("payload"), str):
            raise Garbage(f"not a memotest {what} of this version")
        text = env["payload"].encode()
    except (ValueError, AttributeError, UnicodeError) as e:
        raise Garbage(f"a {what} that does not parse: {e}") from None
    signer.check(domain or fmt, text, env.get("sig"))
    return text


def load_record(
    data: bytes, signer: Signer, blob_kinds: tuple[str, ...], roots: Roots
) -> Travelled:
    """The record of an envelope: :class:`Garbage` if it does not parse, :class:`Untrusted`
    if its signature does not verify."""
    local = roots.local
    text = unseal(data, RECORD_FORMAT, signer)
    try:
        p = json.loads(text)
        inputs = [
            Fingerprint(local(_str(path)), Kind(kind), _str(digest), None, 0, _opt(link))
            for path, kind, digest, link in p["inputs"]
        ]
        blobs = {_str(k): _sha(v) for k, v in _dict(p["blobs"]).items()}
        rec = Record(
            name=_str(p["name"]),
            status=_str(p["status"]),
            def_hash=_str(p["def_hash"]),
            definition=_dict(p["definition"]),
            env_hash=_str(p["env_hash"]),
            env=_dict(p["env"]),
            exit_code=p["exit_code"] if isinstance(p["exit_code"], int) else None,
            duration=float(p["duration"]),
            started_ns=int(p["started_ns"]),
            finished_ns=int(p["finished_ns"]),
            cacheable=p["cacheable"] is True,
            uncacheable_reason=_opt(p["uncacheable_reason"]),
            inputs=inputs,
            writes=[local(_str(w)) for w in p["writes"]],
            log_digest=_opt(p["log"]),
            tests_digest=_opt(p.get("tests")),
            outputs={_str(k): _str(v) for k, v in _dict(p["outputs"]).items()},
            rewritten=[local(_str(w)) for w in p["rewritten"]],
            recorder=_str(p["recorder"]),
            shaping=[_str(s) for s in p["shaping"]],
        )
    except (ValueError, TypeError, KeyError, AttributeError) as e:
        raise Garbage(f"a record that does not parse: {e}") from None
    named = {i.digest for i in inputs if i.kind.value in blob_kinds}
    return Travelled(rec, blobs, named)


def dump_manifest(key: str, entries: list[dict[str, Any]], signer: Signer) -> bytes:
    """The AC entry of ``key`` listing ``entries`` (``{"record": sha256, "at": seconds}``)."""
    entries = entries[:MANIFEST_LIMIT]
    sig = signer.sign(MANIFEST_FORMAT, _manifest_text(key, entries))
    return json.dumps({"memotest": MANIFEST_FORMAT, "entries": entries, "sig": sig}).encode()


def load_manifest(key: str, data: bytes, signer: Signer) -> list[dict[str, Any]]:
    """The entries of a manifest, newest first: :class:`Garbage`, :class:`Untrusted`."""
    try:
        m = json.loads(data)
        if m.get("memotest") != MANIFEST_FORMAT:
            raise Garbage("not a memotest manifest of this version")
        entries = [{"record": _sha(e["record"]), "at": float(e["at"])} for e in m["entries"]]
    except (ValueError, TypeError, KeyError, AttributeError) as e:
        raise Garbage(f"a manifest that does not parse: {e}") from None
    signer.check(MANIFEST_FORMAT, _manifest_text(key, m["entries"]), m.get("sig"))
    return entries[:MANIFEST_LIMIT]


def merge(entries: list[dict[str, Any]], record: str) -> list[dict[str, Any]]:
    """``entries`` with ``record`` first (newest), each record once, bounded."""
    out = [{"record": record, "at": round(time.time(), 3)}]
    out += [e for e in entries if e["record"] != record]
    return out[:MANIFEST_LIMIT]


def _manifest_text(key: str, entries: object) -> bytes:
    return (key + "\0" + json.dumps(entries, sort_keys=True)).encode()


def _str(v: object) -> str:
    if not isinstance(v, str):
        raise TypeError(f"expected a string, got {type(v).__name__}")
    return v


def _opt(v: object) -> str | None:
    return None if v is None else _str(v)


def _dict(v: object) -> dict[str, Any]:
    if not isinstance(v, dict):
        raise TypeError(f"expected an object, got {type(v).__name__}")
    return v


def _sha(v: object) -> str:
    s = _str(v)
    if len(s) != 64 or any(c not in "0123456789abcdef" for c in s):
        raise ValueError(f"not a sha256: {s!r}")
    return s
