"""The record store on real files: round trips, the CAS, the build lock, and what is left
after a writer is killed with SIGKILL at random moments."""

from __future__ import annotations

import os
import random
import signal
import stat
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import xxhash

from memotest.model import Input, Kind
from memotest.store import CorruptBlob, Record, Store, StoreError, StoreLocked
from memotest.world.fingerprint import FileStates

REPO = Path(__file__).resolve().parents[1]


def child_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return env


def spawn(code: str, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(code), *args],
        env=child_env(),
        stdout=subprocess.PIPE,
        text=True,
    )


def make_record(store: Store, tmp_path: Path, name: str = "t", **kw: object) -> Record:
    (tmp_path / "src").mkdir(exist_ok=True)
    (tmp_path / "src" / "a.py").write_text("a = 1\n")
    (tmp_path / "src" / "b.py").write_text("b = 2\n")
    states = FileStates()
    inputs = [
        states.fingerprint(str(tmp_path / "src" / "a.py")),
        states.fingerprint(str(tmp_path / "src" / "b.py")),
        states.fingerprint(str(tmp_path / "src" / "missing.py")),
        states.fingerprint(str(tmp_path / "src"), Kind.LISTING),
        states.fingerprint(str(tmp_path / "src"), Kind.DIR),
    ]
    log = store.put_blob(b"===== 1 passed =====\n")
    out = tmp_path / "out.xml"
    out.write_text("<junit/>")
    fields: dict[str, object] = dict(
        name=name,
        status="passed",
        def_hash="d" * 32,
        definition={"command": "pytest -q", "cwd": str(tmp_path), "timeout": None},
        env_hash="e" * 32,
        env={"PATH": xxhash.xxh3_64_hexdigest(b"/usr/bin"), "PYTHONHASHSEED": None},
        exit_code=0,
        duration=1.25,
        started_ns=1_000,
        finished_ns=2_000,
        cacheable=True,
        uncacheable_reason=None,
        inputs=inputs,
        writes=[str(tmp_path / "out.xml"), str(tmp_path / ".cache" / "x")],
        log_digest=log,
        outputs={str(out): store.put_file(out)},
        recorder="test-recorder/1",
    )
    fields.update(kw)
    return Record(**fields)  # type: ignore[arg-type]


def test_record_round_trip(tmp_path: Path) -> None:
    with Store.open(tmp_path) as store:
        rec = make_record(store, tmp_path)
        store.put(rec)
        got = store.get("t")
    assert got is not None
    expected_inputs = sorted(rec.inputs, key=lambda i: (i.path, i.kind.value))
    assert got.inputs == expected_inputs
    assert got.writes == sorted(rec.writes)
    assert got == Record(**{**rec.__dict__, "inputs": expected_inputs, "writes": got.writes})
    # Reopened read-only by another "process": the same record.
    with Store.open(tmp_path, lock=False) as ro:
        again = ro.get("t")
        assert again == got
        assert ro.names() == ["t"]
        listing = next(i for i in got.inputs if i.kind is Kind.LISTING)
        assert ro.listing_names(listing.digest) == ["a.py", "b.py"]
        with pytest.raises(StoreError):
            ro.put(got)


def test_replace_remove_and_names(tmp_path: Path) -> None:
    with Store.open(tmp_path) as store:
        store.put(make_record(store, tmp_path, "b"))
        store.put(make_record(store, tmp_path, "a"))
        store.put(make_record(store, tmp_path, "a", status="failed", exit_code=1))
        assert store.names() == ["a", "b"]
        got = store.get("a")
        assert got is not None and got.status == "failed" and got.exit_code == 1
        assert store.remove("a") is True
        assert store.remove("a") is False
        assert store.get("a") is None
        assert store.names() == ["b"]


def test_plain_inputs_and_uncacheable_round_trip(tmp_path: Path) -> None:
    with Store.open(tmp_path) as store:
        store.put(
            Record(
                "u",
                "passed",
                cacheable=False,
                uncacheable_reason="trace incomplete: static binary",
                inputs=[Input("/etc/hostname", Kind.FILE, "0" * 32)],
                recorder="r",
            )
        )
        got = store.get("u")
    assert got is not None
    assert got.cacheable is False
    assert got.uncacheable_reason == "trace incomplete: static binary"
    assert [(i.path, i.kind, i.digest) for i in got.inputs] == [
        ("/etc/hostname", Kind.FILE, "0" * 32)
    ]


def test_bad_status_and_missing_blob_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        Record("x", "ok")
    with Store.open(tmp_path) as store:
        with pytest.raises(StoreError, match="not in the store"):
            store.put(Record("x", "passed", log_digest="ab" * 16, recorder="r"))
        assert store.names() == []


def test_shared_fingerprints_are_interned(tmp_path: Path) -> None:
    with Store.open(tmp_path) as store:
        for i in range(20):
            store.put(make_record(store, tmp_path, f"t{i}"))
        conn = store._db()
        assert conn.execute("SELECT count(*) FROM paths").fetchone()[0] == 4
        assert conn.execute("SELECT count(*) FROM fps").fetchone()[0] == 5


def test_blobs(tmp_path: Path) -> None:
    with Store.open(tmp_path) as store:
        for data in (b"", b"x", b"log line\n" * 10_000, os.urandom(100_000)):
            d = store.put_blob(data)
            assert d == xxhash.xxh3_128_hexdigest(data)
            assert store.read_blob(d) == data
            assert store.blob_path(d).parent.name == d[:2]
        big = tmp_path / "big.bin"
        data = os.urandom(3 << 20) + b"\0" * (2 << 20)
        big.write_bytes(data)
        d = store.put_file(big)
        assert d == xxhash.xxh3_128_hexdigest(data)
        assert store.read_blob(d) == data
        assert store.put_file(big) == d
        # restore: written atomically, skipped when the content is already there
        dest = tmp_path / "restored" / "out.bin"
        assert store.restore_file(d, dest) is True
        assert dest.read_bytes() == data
        before = os.stat(dest)
        assert store.restore_file(d, dest) is False
        assert os.stat(dest).st_ino == before.st_ino
        dest.write_bytes(b"other")
        assert store.restore_file(d, dest) is True
        assert dest.read_bytes() == data
        # a blob that does not hash to its name is refused
        small = store.put_blob(b"small")
        store.blob_path(small).write_bytes(b"Pnot small")
        with pytest.raises(CorruptBlob):
            store.read_blob(small)
        assert not [p for p in store.cas_dir.rglob("*") if p.name.startswith(".tmp-")]


def test_gc_and_clean(tmp_path: Path) -> None:
    with Store.open(tmp_path) as store:
        store.put(make_record(store, tmp_path, "keep"))
        gone = store.put_blob(b"unreferenced")
        store.put(
            Record("drop", "passed", inputs=[Input("/nope/x", Kind.ABSENT, "")], recorder="r")
        )
        store.remove("drop")
        stats = store.gc()
        assert stats.fingerprints == 1 and stats.paths == 1 and stats.blobs == 1
        assert not store.has_blob(gone)
        kept = store.get("keep")
        assert kept is not None and store.read_blob(kept.log_digest or "")
        assert len(kept.inputs) == 5
        assert store.size_bytes() > 0
        store.clean()
        assert store.names() == []
        assert not list(store.cas_dir.iterdir())
        store.put(make_record(store, tmp_path, "again"))
        assert store.names() == ["again"]


def test_gc_runs_once_the_writes_outnumber_the_records(tmp_path: Path) -> None:
    from memotest.store import GC_MIN_PUTS, MAX_VARIANTS

    count = iter(range(10**6))

    def replace(store: Store, n: int) -> None:
        for _ in range(n):  # the same record rewritten, each time with a new input and log
            i = next(count)
            rec = Record("t", "passed", inputs=[Input(f"/nope/{i}", Kind.ABSENT, "")])
            rec.log_digest = store.put_blob(f"log {i}".encode())
            store.put(rec)

    with Store.open(tmp_path) as store:
        assert store.gc_if_due() is None  # nothing written
        replace(store, GC_MIN_PUTS - 1)
        assert store.gc_if_due() is None
    with Store.open(tmp_path) as store:  # the count carries over from build to build
        replace(store, 1)
        stats = store.gc_if_due()
        assert stats is not None
        # Each rewrite is a variant (other inputs); the last MAX_VARIANTS of them are kept.
        gone = GC_MIN_PUTS - MAX_VARIANTS
        assert stats.blobs == gone and stats.fingerprints == gone
        assert store.get("t") is not None and store.read_blob(store.get("t").log_digest)
        replace(store, 1)
        assert store.gc_if_due() is None  # counting starts again


def test_clean_gc_keeps_the_records(tmp_path: Path) -> None:
    (tmp_path / "memotest.toml").write_text('[targets.t]\ncommand = "true"\n')
    from conftest import memotest

    assert memotest("build", cwd=tmp_path).returncode == 0
    assert memotest("build", "--force", cwd=tmp_path).returncode == 0
    proc = memotest("clean", "--gc", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert b"removed" in proc.stdout and b"blobs" in proc.stdout
    assert b"1 cached" in memotest("build", cwd=tmp_path).stdout


LOCK_HOLDER = """
    import sys, time
    from memotest.store import Store
    with Store.open(sys.argv[1]):
        print("locked", flush=True)
        time.sleep(60)
"""


def test_second_build_times_out_naming_the_pid(tmp_path: Path) -> None:
    holder = spawn(LOCK_HOLDER, str(tmp_path))
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == "locked"
        t0 = time.monotonic()
        with pytest.raises(StoreLocked, match=rf"pid {holder.pid}\b") as info:
            Store.open(tmp_path, lock_timeout=0.5)
        assert 0.4 < time.monotonic() - t0 < 5
        assert info.value.pid == holder.pid
        assert "another memotest build is running on this store" in str(info.value)
        with Store.open(tmp_path, lock=False) as ro:  # readers don't need the lock
            assert ro.names() == []
    finally:
        holder.kill()
        holder.wait()
    with Store.open(tmp_path, lock_timeout=5) as store:  # the kernel released it
        assert store.locked


def test_lock_is_exclusive_within_one_process(tmp_path: Path) -> None:
    with Store.open(tmp_path), pytest.raises(StoreLocked, match=rf"pid {os.getpid()}\b"):
        Store.open(tmp_path, lock_timeout=0.1)


WRITER = """
    import os, sys
    from memotest.world.fingerprint import FileStates
    from memotest.model import Kind
    from memotest.store import Record, Store

    root, data = sys.argv[1], sys.argv[2]
    with Store.open(root) as store:
        print("ready", flush=True)
        i = int.from_bytes(os.urandom(2), "little")
        while True:
            i += 1
            if i % 4 == 0:  # rewrite one input, same size every time
                with open(os.path.join(data, f"in{(i // 4) % 3}.txt"), "w") as f:
                    f.write(f"{i:08d}\\n")
            extra = os.path.join(data, f"extra{i % 2}.txt")
            if i % 11 == 0:
                open(extra, "w").close()
            elif i % 13 == 0 and os.path.exists(extra):
                os.unlink(extra)
            states = FileStates()
            inputs = [states.fingerprint(os.path.join(data, f"in{n}.txt")) for n in range(3)]
            inputs.append(states.fingerprint(os.path.join(data, "absent.txt")))
            inputs.append(states.fingerprint(data, Kind.LISTING))
            log = store.put_blob((f"run {i}\\n" * 500).encode())
            store.put(Record(
                name=f"t{i % 4}", status="passed", def_hash="d", env_hash="e",
                definition={"i": i}, exit_code=0, duration=i / 1000, started_ns=i,
                finished_ns=i + 1, inputs=inputs, writes=[f"/w/{i}"], log_digest=log,
                recorder="r",
            ))
"""


def observed_digest(path: str, kind: Kind) -> tuple[Kind, str] | None:
    """What a record's input is now, computed without memotest's code."""
    if kind is Kind.ABSENT:
        return (Kind.ABSENT, "") if not os.path.lexists(path) else None
    if kind is Kind.LISTING:
        with os.scandir(os.fsencode(path)) as it:
            entries = sorted((e.name, "d" if e.is_dir() else "f") for e in it)
        types = "".join(t for _n, t in entries).encode()
        blob = b"\0".join(n for n, _t in entries) + b"\0\0" + types
        return Kind.LISTING, xxhash.xxh3_128_hexdigest(blob)
    with open(path, "rb") as f:
        content = xxhash.xxh3_128_hexdigest(f.read())
        st = os.fstat(f.fileno())
    return Kind.FILE, f"{content}:{stat.S_IMODE(st.st_mode):o}:{st.st_nlink}"


def test_sigkill_never_leaves_a_partial_record_or_a_wrong_hit(tmp_path: Path) -> None:
    from memotest.check.keys import TargetKey
    from memotest.check.plan import Fresh, plan
    from memotest.model import Target

    data = tmp_path / "data"
    data.mkdir()
    rng = random.Random(1234)
    seen_fresh = seen_stale = 0
    for _iteration in range(10):
        writer = spawn(WRITER, str(tmp_path), str(data))
        assert writer.stdout is not None
        assert writer.stdout.readline().strip() == "ready"
        time.sleep(rng.uniform(0.003, 0.15))
        os.kill(writer.pid, signal.SIGKILL)
        writer.wait()
        assert writer.returncode == -signal.SIGKILL

        with Store.open(tmp_path, lock_timeout=5) as store:
            names = store.names()
            for name in names:
                rec = store.get(name)
                assert rec is not None
                assert rec.status == "passed" and rec.recorder == "r"
                i = rec.definition["i"]
                assert rec.started_ns == i and rec.writes == [f"/w/{i}"]
                assert len(rec.inputs) == 5
                assert store.read_blob(rec.log_digest or "") == (f"run {i}\n" * 500).encode()
            targets = [Target(n, "true", str(tmp_path)) for n in names]
            keys = {n: TargetKey("d", {}, "e", {}) for n in names}
            result = plan(targets, keys, store, FileStates(), recorder="r")
            for name, verdict in result.items():
                if not isinstance(verdict, Fresh):
                    seen_stale += 1
                    continue
                seen_fresh += 1
                for inp in verdict.record.inputs:
                    assert observed_digest(inp.path, inp.kind) == (inp.kind, inp.digest), (
                        name,
                        inp.path,
                    )
            # every blob under a digest name is complete
            for blob in store.cas_dir.glob("??/*"):
                if not blob.name.startswith("."):
                    store.read_blob(blob.parent.name + blob.name)
    # Both outcomes were exercised: hits that truly hold, and records left behind.
    assert seen_fresh > 0 and seen_stale > 0


BLOB_WRITER = """
    import os, sys
    from memotest.store import Store
    with Store.open(sys.argv[1]) as store:
        while True:
            print(store.put_blob(os.urandom(1 << 20) * 4), flush=True)
"""


def test_cas_blobs_are_atomic_under_sigkill(tmp_path: Path) -> None:
    rng = random.Random(99)
    for _ in range(6):
        writer = spawn(BLOB_WRITER, str(tmp_path))
        assert writer.stdout is not None
        assert len(writer.stdout.readline().strip()) == 32  # one blob is in
        deadline = time.monotonic() + rng.uniform(0.0, 0.1)
        checked: set[str] = set()
        while time.monotonic() < deadline:  # readers never see a partial blob either
            with Store.open(tmp_path, lock=False) as ro:
                for blob in ro.cas_dir.glob("??/*"):
                    digest = blob.parent.name + blob.name
                    if not blob.name.startswith(".") and digest not in checked:
                        assert len(ro.read_blob(digest)) == 4 << 20
                        checked.add(digest)
        os.kill(writer.pid, signal.SIGKILL)
        writer.wait()
    with Store.open(tmp_path) as store:
        blobs = [b for b in store.cas_dir.glob("??/*") if not b.name.startswith(".")]
        assert blobs
        for blob in blobs:
            assert len(store.read_blob(blob.parent.name + blob.name)) == 4 << 20
        store.gc()  # sweeps the temp files the killed writers left
        assert not [p for p in store.cas_dir.rglob(".tmp-*")]


def test_signature_sqlite_cannot_hold_is_dropped(tmp_path: Path) -> None:
    from memotest.world.fingerprint import Fingerprint

    p = tmp_path / "f"
    p.write_text("x")
    real = FileStates().fingerprint(str(p))
    assert real.sig is not None
    huge = Fingerprint(real.path, Kind.FILE, real.digest, real.sig._replace(ino=2**64 - 5), 1)
    with Store.open(tmp_path) as store:
        store.put(Record("t", "passed", inputs=[huge], recorder="r"))
        got = store.get("t")
    assert got is not None
    [inp] = got.inputs
    assert (inp.digest, inp.sig) == (real.digest, None)  # kept, and always hashed


def _variant(store: Store, i: int, *, status: str = "passed", size: int = 10) -> Record:
    """A record of ``t`` whose one input is the absent path ``/nope/I``, with a log of
    ``size`` random bytes."""
    rec = Record("t", status, inputs=[Input(f"/nope/{i}", Kind.ABSENT, "")], finished_ns=i)
    rec.log_digest = store.put_blob(os.urandom(size))
    return rec


def test_variants_are_added_and_the_same_observations_replaced(tmp_path: Path) -> None:
    from memotest.store import MAX_VARIANTS

    with Store.open(tmp_path) as store:
        store.put(_variant(store, 1))
        store.put(_variant(store, 2))
        heads = store.variant_heads(["t"])["t"]
        assert [h.finished_ns for h in heads] == [2, 1]  # newest first
        store.put(_variant(store, 1, status="failed"))  # the same inputs: replaces the pass
        got = store.variants(h.id for h in store.variant_heads(["t"])["t"])
        assert sorted((r.finished_ns, r.status) for r in got.values()) == [
            (1, "failed"),
            (2, "passed"),
        ]
        assert store.get("t").status == "passed"  # the newest (finished last)
        for i in range(3, 3 + MAX_VARIANTS):
            store.put(_variant(store, i))
        heads = store.variant_heads(["t"])["t"]
        assert len(heads) == MAX_VARIANTS  # the least recently used went first
        assert min(h.finished_ns for h in heads) == 3
        assert store.remove("t") and store.variant_heads(["t"]) == {}


def test_the_size_bound_evicts_the_least_recently_used(tmp_path: Path) -> None:
    with Store.open(tmp_path) as store:
        for i in range(1, 6):
            store.put(_variant(store, i, size=200_000))
        heads = store.variant_heads(["t"])["t"]
        oldest = next(h.id for h in heads if h.finished_ns == 1)
        store.mark_used([oldest])  # replayed: now the most recently used
        stats = store.gc(max_bytes=500_000)
        assert stats.variants >= 3
        kept = {h.finished_ns for h in store.variant_heads(["t"])["t"]}
        assert 1 in kept and 2 not in kept
    with Store.open(tmp_path, lock=False) as store:  # the WAL was checkpointed at close
        assert store.size_bytes() <= 500_000
