"""Fresh or stale, and the reason, for targets recorded against real files."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from memotest.check.keys import TargetKey
from memotest.check.plan import Fresh, Stale, plan
from memotest.inputs.check import describe_change
from memotest.model import Kind, Target
from memotest.store import Record, Store
from memotest.world.fingerprint import RACY_WINDOW_NS, FileStates

RECORDER = "test-recorder/1"
AGE_S = RACY_WINDOW_NS / 1e9 + 0.2


def key(**kw: object) -> TargetKey:
    fields: dict[str, object] = dict(
        def_hash="def-1",
        definition={"command": "pytest -q", "cwd": "/p", "timeout": None, "tags": []},
        env_hash="env-1",
        env={"PATH": "h-path", "PYTHONHASHSEED": None},
    )
    fields.update(kw)
    return TargetKey(**fields)  # type: ignore[arg-type]


class Project:
    """A tmp project with a few source files, a store, and helpers to record targets."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.src = root / "src"
        self.src.mkdir()
        for name in ("a.py", "b.py", "c.py"):
            (self.src / name).write_text(f"# {name}\n")
        self.store = Store.open(root)

    def path(self, name: str) -> str:
        return str(self.src / name)

    def record(self, name: str, files: list[str], **kw: object) -> Record:
        states = FileStates()
        inputs = [states.fingerprint(self.path(f)) for f in files]
        inputs.append(states.fingerprint(self.path("absent.py")))
        inputs.append(states.fingerprint(str(self.src), Kind.LISTING))
        k = key()
        fields: dict[str, object] = dict(
            name=name,
            status="passed",
            def_hash=k.def_hash,
            definition=dict(k.definition),
            env_hash=k.env_hash,
            env=dict(k.env),
            exit_code=0,
            duration=0.5,
            inputs=inputs,
            log_digest=self.store.put_blob(f"log of {name}\n".encode()),
            recorder=RECORDER,
        )
        fields.update(kw)
        rec = Record(**fields)  # type: ignore[arg-type]
        self.store.put(rec)
        return rec

    def plan(
        self, *names: str, keys: dict[str, TargetKey] | None = None, **kw: object
    ) -> tuple[dict[str, Fresh | Stale], FileStates]:
        targets = [Target(n, "pytest -q", str(self.root)) for n in names]
        states = FileStates()
        keys = {n: (keys or {}).get(n, key()) for n in names}
        return plan(targets, keys, self.store, states, recorder=RECORDER, **kw), states  # type: ignore[arg-type]


@pytest.fixture
def project(tmp_path: Path):
    p = Project(tmp_path)
    yield p
    p.store.close()


def test_fresh_when_nothing_changed(project: Project) -> None:
    rec = project.record("t", ["a.py", "b.py"])
    result, _ = project.plan("t")
    assert isinstance(result["t"], Fresh)
    assert result["t"].record.log_digest == rec.log_digest
    assert len(result["t"].record.inputs) == 4


def test_new_forced_and_no_cache(project: Project) -> None:
    project.record("t", ["a.py"])
    result, _ = project.plan("t", "never")
    assert result["never"] == Stale("new", "never run (no record)")
    result, _ = project.plan("t", force=True)
    assert isinstance(result["t"], Stale) and result["t"].kind == "forced"
    targets = [Target("t", "pytest -q", str(project.root), tags=frozenset({"no-cache"}))]
    out = plan(targets, {"t": key()}, project.store, FileStates(), recorder=RECORDER)
    assert isinstance(out["t"], Stale) and out["t"].kind == "no-cache"


def test_failed_timeout_and_uncacheable_are_stale_with_reason(project: Project) -> None:
    project.record("f", ["a.py"], status="failed", exit_code=3)
    project.record("to", ["a.py"], status="timeout", exit_code=None)
    project.record(
        "u",
        ["a.py"],
        cacheable=False,
        uncacheable_reason="connected to a non-loopback address: inet:93.184.216.34:80",
    )
    result, _ = project.plan("f", "to", "u")
    assert result["f"] == Stale("failed", "last run failed (exit code 3)", detail="failed")
    assert result["to"] == Stale("failed", "last run timed out", detail="timeout")
    u = result["u"]
    assert isinstance(u, Stale) and u.kind == "uncacheable"
    assert u.reason == "connected to a non-loopback address: inet:93.184.216.34:80"


def test_recorder_change_is_stale(project: Project) -> None:
    project.record("t", ["a.py"], recorder="memotest-0.0.1/1")
    result, _ = project.plan("t")
    assert isinstance(result["t"], Stale) and result["t"].kind == "recorder"
    assert "memotest-0.0.1/1" in result["t"].reason


def test_definition_change_names_the_field(project: Project) -> None:
    project.record("t", ["a.py"])
    new = key(def_hash="def-2", definition={**key().definition, "command": "pytest -x"})
    result, _ = project.plan("t", keys={"t": new})
    assert result["t"] == Stale(
        "definition", "definition changed: command", detail="command", count=1
    )
    two = key(def_hash="def-3", definition={**key().definition, "command": "x", "timeout": 30.0})
    result, _ = project.plan("t", keys={"t": two})
    assert isinstance(result["t"], Stale)
    assert result["t"].reason == "definition changed: command, timeout"


def test_env_change_names_the_variable(project: Project) -> None:
    project.record("t", ["a.py"])
    new = key(env_hash="env-2", env={"PATH": "h-path", "PYTHONHASHSEED": "h-0"})
    result, _ = project.plan("t", keys={"t": new})
    stale = result["t"]
    assert isinstance(stale, Stale) and stale.kind == "env"
    assert stale.reason == "environment changed: PYTHONHASHSEED"
    assert stale.detail == "PYTHONHASHSEED: now set"


def test_changed_input_names_the_first_path_and_counts(project: Project) -> None:
    project.record("t", ["a.py", "b.py", "c.py"])
    project.record("other", ["c.py"])
    (project.src / "b.py").write_text("# b changed\n")
    (project.src / "a.py").write_text("# a changed, a different size\n")
    result, states = project.plan("t", "other")
    stale = result["t"]
    assert isinstance(stale, Stale) and stale.kind == "input"
    assert stale.path == project.path("a.py")
    assert stale.detail == "content changed"
    assert stale.reason == f"{project.path('a.py')}: content changed (and 1 more changed input)"
    assert stale.count == 2
    assert isinstance(result["other"], Fresh)
    for p in ("a.py", "b.py", "c.py"):  # shared paths: one stat each for both targets
        assert states.counters.stat_calls[project.path(p)] == 1


def test_new_module_shadowing_and_listing(project: Project) -> None:
    project.record("t", ["a.py"])
    (project.src / "absent.py").write_text("")
    result, _ = project.plan("t")
    stale = result["t"]
    assert isinstance(stale, Stale)
    assert stale.count == 2  # the ABSENT input and the listing
    # Reported in path order: the folder's listing sorts before the file in it.
    assert stale.reason == (
        f"{project.src}: directory gained entries: absent.py (and 1 more changed input)"
    )
    rec = project.store.get("t")
    assert rec is not None
    absent = next(i for i in rec.inputs if i.kind is Kind.ABSENT)
    assert describe_change(absent, FileStates()) == "appeared"
    # The listing alone, described with the names the store saved.
    (project.src / "absent.py").unlink()
    project.record("t", ["a.py"])
    (project.src / "zz.py").write_text("")
    result, _ = project.plan("t")
    assert result["t"] == Stale(
        "input",
        f"{project.src}: directory gained entries: zz.py",
        path=str(project.src),
        detail="directory gained entries: zz.py",
        count=1,
    )


def test_missing_declared_output_is_not_stale_but_missing_log_blob_is(
    project: Project, tmp_path: Path
) -> None:
    out = tmp_path / "report.xml"
    out.write_text("<x/>")
    rec = project.record("t", ["a.py"], outputs={str(out): project.store.put_file(out)})
    out.unlink()
    result, _ = project.plan("t")
    assert isinstance(result["t"], Fresh)
    project.store.blob_path(rec.log_digest or "").unlink()
    result, _ = project.plan("t")
    assert isinstance(result["t"], Stale) and result["t"].kind == "blob-missing"


def test_noop_plan_hashes_nothing_and_writes_nothing(project: Project) -> None:
    for name in ("a.py", "b.py", "c.py"):
        p = project.path(name)
        t = time.time_ns() - 3_600 * 10**9
        os.utime(p, ns=(t, t))
    time.sleep(AGE_S)
    for i in range(30):
        project.record(f"t{i}", ["a.py", "b.py", "c.py"])
    conn = project.store._db()
    before = conn.total_changes
    result, states = project.plan(*(f"t{i}" for i in range(30)))
    assert all(isinstance(v, Fresh) for v in result.values())
    assert sum(states.counters.hashed.values()) == 0
    assert sum(states.counters.listed.values()) == 0
    assert conn.total_changes == before


def test_racy_fingerprints_are_refreshed_once(project: Project) -> None:
    project.record("t", ["a.py", "b.py"])  # recorded while the files are brand new: racy
    time.sleep(AGE_S)
    result, states = project.plan("t")
    assert isinstance(result["t"], Fresh)
    assert states.counters.hashed[project.path("a.py")] == 1  # had to be hashed...
    result, states = project.plan("t")
    assert isinstance(result["t"], Fresh)
    assert sum(states.counters.hashed.values()) == 0  # ...once: the refresh was stored
    assert sum(states.counters.listed.values()) == 0
    # Same content rewritten: racy again. A read-only store (explain) re-hashes but is
    # not written to.
    (project.src / "a.py").write_text("# a.py\n")
    project.store.close()
    project.store = Store.open(project.root, lock=False)
    conn = project.store._db()
    before = conn.total_changes
    for _ in range(2):
        result, states = project.plan("t")
        assert isinstance(result["t"], Fresh)
        assert states.counters.hashed[project.path("a.py")] == 1
    assert conn.total_changes == before


def test_old_fingerprint_of_a_path_fails_without_hashing(project: Project) -> None:
    a = project.path("a.py")

    def age() -> None:
        t = time.time_ns() - 3_600 * 10**9
        os.utime(a, ns=(t, t))
        time.sleep(AGE_S)

    age()
    project.record("old", ["a.py"])
    (project.src / "a.py").write_text("# a.py, version 2\n")
    age()
    project.record("new", ["a.py"])
    result, states = project.plan("old", "new")
    assert isinstance(result["new"], Fresh)
    assert result["old"] == Stale("input", f"{a}: content changed", a, "content changed", 1)
    # The current fingerprint was proven by its signature, so the old one's digest is known
    # to differ without reading the file.
    assert sum(states.counters.hashed.values()) == 0
