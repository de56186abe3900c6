"""``memotest build`` end to end: real targets files, real processes, the real shim."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from conftest import memotest

from memotest.check.plan import Fresh, Stale
from memotest.loop.command_runner import DryRunCommandRunner
from memotest.model import Target
from memotest.store import Record

PY = sys.executable


def project(tmp_path: Path, toml: str, files: dict[str, str] | None = None) -> Path:
    for rel, text in (files or {}).items():
        p = tmp_path / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(textwrap.dedent(text))
    (tmp_path / "memotest.toml").write_text(textwrap.dedent(toml))
    return tmp_path


def build(root: Path, *args: str, env: dict | None = None) -> tuple[int, str, dict]:
    report = root / "report.json"
    proc = memotest("build", "-j", "2", "--json-report", str(report), *args, cwd=root, env=env)
    out = proc.stdout.decode() + proc.stderr.decode()
    data = json.loads(report.read_text()) if report.exists() else {}
    if report.exists():
        report.unlink()
    return proc.returncode, out, data


def statuses(data: dict) -> dict[str, str]:
    return {t["name"]: t["status"] for t in data["targets"]}


def settle(root: Path, *args: str, env: dict | None = None) -> dict:
    """Builds until nothing runs (at most 3 times) and returns the last report."""
    for _ in range(3):
        code, out, data = build(root, *args, env=env)
        assert code == 0, out
        if all(s == "cached" for s in statuses(data).values()):
            return data
    raise AssertionError(f"never settled:\n{out}")


READER = """
import sys
print(open(sys.argv[1]).read())
"""


@pytest.fixture
def readers(tmp_path):
    return project(
        tmp_path,
        f"""
        [targets.a]
        command = ["{PY}", "reader.py", "a.txt"]
        [targets.b]
        command = ["{PY}", "reader.py", "b.txt"]
    """,
        {"reader.py": READER, "a.txt": "A", "b.txt": "B"},
    )


def test_second_build_caches_everything(readers):
    code, out, data = build(readers)
    assert code == 0, out
    assert statuses(data) == {"a": "passed", "b": "passed"}
    code, out, data = build(readers)
    assert code == 0, out
    assert statuses(data) == {"a": "cached", "b": "cached"}
    assert "(cached) PASSED a" in out
    assert data["summary"]["cached"] == 2 and data["summary"]["saved"] > 0


def test_editing_a_read_file_reruns_only_that_target(readers):
    settle(readers)
    (readers / "a.txt").write_text("A2")
    _code, out, data = build(readers)
    assert statuses(data) == {"a": "passed", "b": "cached"}
    assert "A2" not in out  # logs of passing targets are not printed


def test_explain_names_the_changed_path(readers):
    settle(readers)
    (readers / "a.txt").write_text("changed")
    proc = memotest("explain", "a", "b", cwd=readers)
    out = proc.stdout.decode()
    assert proc.returncode == 0
    assert f"a: would run: {readers / 'a.txt'}: content changed" in out
    assert "b: up to date" in out


def test_creating_a_file_in_a_listed_directory_reruns(tmp_path):
    root = project(
        tmp_path,
        f"""
        [targets.lister]
        command = ["{PY}", "-c", "import os; print(sorted(os.listdir('data')))"]
        [targets.other]
        command = ["{PY}", "-c", "print('hi')"]
    """,
        {"data/one.txt": "1"},
    )
    settle(root)
    (root / "data" / "two.txt").write_text("2")
    _, _, data = build(root)
    assert statuses(data) == {"lister": "passed", "other": "cached"}
    settle(root)
    (root / "data" / "three.txt").write_text("3")
    proc = memotest("explain", "lister", cwd=root)
    assert "gained entries: three.txt" in proc.stdout.decode()


SCRATCH = (
    "import os, shutil; os.makedirs('scratch/sub'); open('scratch/sub/f.txt', 'w').close(); "
    "print(sorted(os.listdir('scratch')), os.listdir('scratch/sub')); shutil.rmtree('scratch')"
)


def test_a_folder_the_target_made_listed_and_removed_is_cached_as_absent(tmp_path):
    root = project(
        tmp_path,
        f"""
        [targets.scratch]
        command = ["{PY}", "-c", "{SCRATCH}"]
    """,
    )
    settle(root)  # cacheable: what it listed, it had put there itself
    (root / "scratch").mkdir()  # it was absent
    proc = memotest("explain", "scratch", cwd=root)
    assert "would run" in proc.stdout.decode() and "scratch" in proc.stdout.decode()
    _, _, data = build(root)
    assert statuses(data) == {"scratch": "passed"}, data  # ran again


def test_creating_a_module_the_import_search_missed_reruns(tmp_path):
    code = "import sys; sys.path.insert(0, 'extra'); sys.path.insert(1, 'lib');import helper"
    root = project(
        tmp_path,
        f"""
        [targets.imp]
        command = ["{PY}", "-c", "{code}"]
        env = {{ PYTHONDONTWRITEBYTECODE = "1" }}
    """,
        {"lib/helper.py": "X = 1\n", "extra/.keep": ""},
    )
    settle(root)
    # A module earlier on sys.path now shadows lib/helper.py.
    (root / "extra" / "helper.py").write_text("raise SystemExit(3)\n")
    _, out, data = build(root)
    assert statuses(data) == {"imp": "failed"}, out


def test_pass_env_variable_change_reruns(readers):
    env = dict(os.environ, PYTHONFOO="1")
    settle(readers, env=env)
    _, _, data = build(readers, env=dict(os.environ, PYTHONFOO="2"))
    assert set(statuses(data).values()) == {"passed"}
    proc = memotest("explain", "a", cwd=readers, env=dict(os.environ, PYTHONFOO="3"))
    assert "PYTHONFOO" in proc.stdout.decode()


def test_variable_outside_pass_env_is_not_passed_nor_keyed(readers):
    settle(readers)
    _, _, data = build(readers, env=dict(os.environ, MEMOTEST_UNRELATED_VAR="x"))
    assert set(statuses(data).values()) == {"cached"}


def test_definition_change_reruns_and_explain_names_the_field(readers):
    settle(readers)
    toml = (readers / "memotest.toml").read_text()
    (readers / "memotest.toml").write_text(toml.replace('"a.txt"]', '"a.txt"]\ntimeout = 99'))
    proc = memotest("explain", "a", cwd=readers)
    assert "definition changed: timeout" in proc.stdout.decode()
    _, _, data = build(readers)
    assert statuses(data) == {"a": "passed", "b": "cached"}


def test_failed_target_reruns_and_its_log_is_printed(tmp_path):
    root = project(
        tmp_path,
        f"""
        [targets.bad]
        command = ["{PY}", "-c", "print('boom-output'); raise SystemExit(4)"]
    """,
    )
    for _ in range(2):
        code, out, data = build(root)
        assert code == 1
        assert statuses(data) == {"bad": "failed"}
        assert data["targets"][0]["exit_code"] == 4
        assert "boom-output" in out
        assert "FAILED bad" in out


def test_incomplete_trace_never_caches(tmp_path, cprog):
    static = cprog("static_reader", static=True)
    (tmp_path / "s.txt").write_text("x")
    root = project(
        tmp_path,
        f"""
        [targets.static]
        command = ["{static}", "s.txt"]
    """,
    )
    for _ in range(2):
        code, out, data = build(root, "-v")
        assert code == 0, out
        assert statuses(data) == {"static": "passed"}
    proc = memotest("explain", "static", cwd=root)
    assert "statically linked" in proc.stdout.decode()


def test_outputs_are_restored_on_a_hit(tmp_path):
    root = project(
        tmp_path,
        f"""
        [targets.gen]
        command = ["{PY}", "gen.py"]
        outputs = ["reports/r.xml", "reports/run.sh"]
    """,
        {
            "gen.py": "import os\nos.makedirs('reports', exist_ok=True)\n"
            "open('reports/r.xml', 'w').write('<ok/>')\n"
            "open('reports/run.sh', 'w').write('#!/bin/sh\\necho ran\\n')\n"
            "os.chmod('reports/run.sh', 0o755)\n"
        },
    )
    settle(root)
    (root / "reports" / "r.xml").unlink()
    (root / "reports" / "run.sh").unlink()
    _, out, data = build(root)
    assert statuses(data) == {"gen": "cached"}, out
    assert (root / "reports" / "r.xml").read_text() == "<ok/>"
    assert not os.access(root / "reports" / "r.xml", os.X_OK)
    # an executable output comes back executable (and is put right if only its mode changed)
    assert subprocess.run([root / "reports" / "run.sh"], capture_output=True).stdout == b"ran\n"
    os.chmod(root / "reports" / "run.sh", 0o644)
    _, out, data = build(root)
    assert statuses(data) == {"gen": "cached"}, out
    assert os.access(root / "reports" / "run.sh", os.X_OK)


def running_command(pid: int) -> str | None:
    """The command line of process ``pid`` while it is running (not a zombie), else None."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return None
    if stat.rsplit(")", 1)[1].split()[0] in ("Z", "X"):
        return None
    return cmdline.replace(b"\0", b" ").decode(errors="replace").strip()


def descendants(pid: int) -> list[int]:
    """The processes below ``pid`` in the process tree (found through their parent ids)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def wait_gone(pids: list[int], command: str, seconds: float = 3) -> list[int]:
    """Waits until no process of ``pids`` runs ``command`` any more; the ones left."""
    deadline = time.monotonic() + seconds  # a killed process may take a moment to be gone
    while True:
        left = [p for p in pids if running_command(p) == command]
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.05)


def test_timeout_kills_the_whole_tree(tmp_path):
    # The sleepers say their pids in a file: only this build's processes are looked at.
    pids = tmp_path / "pids"
    (tmp_path / "proj").mkdir()
    root = project(
        tmp_path / "proj",
        f"""
        [targets.slow]
        command = "sleep 61 & echo $! >> {pids}; sleep 61 & echo $! >> {pids}; wait"
        timeout = 1
        """,
    )
    t0 = time.monotonic()
    code, _out, data = build(root)
    assert time.monotonic() - t0 < 20
    assert code == 1
    assert statuses(data) == {"slow": "timeout"}
    sleepers = [int(line) for line in pids.read_text().split()]
    assert len(sleepers) == 2
    assert wait_gone(sleepers, "sleep 61") == []


def test_needs_order_and_skip_on_failure(tmp_path):
    root = project(
        tmp_path,
        f"""
        [targets.first]
        command = ["{PY}", "-c", "open('made.txt', 'w').write('1')"]
        [targets.second]
        command = ["{PY}", "-c", "print(open('made.txt').read())"]
        needs = ["first"]
        [targets.broken]
        command = "exit 1"
        [targets.after_broken]
        command = "true"
        needs = ["broken"]
    """,
    )
    code, _out, data = build(root)
    assert code == 1
    s = statuses(data)
    assert s["first"] == "passed" and s["second"] == "passed"
    assert s["after_broken"] == "skipped"
    reason = next(t["reason"] for t in data["targets"] if t["name"] == "after_broken")
    assert "broken" in reason


def test_junit_xml_report(readers, tmp_path):
    import xml.etree.ElementTree as ET

    out = tmp_path / "junit.xml"
    proc = memotest("build", "--junit-xml", str(out), cwd=readers)
    assert proc.returncode == 0
    suite = ET.parse(out).getroot().find("testsuite")
    assert suite.get("tests") == "2" and suite.get("failures") == "0"
    assert {c.get("name") for c in suite.iter("testcase")} == {"a", "b"}


def test_foreach_makes_one_target_per_file(tmp_path):
    root = project(
        tmp_path,
        f"""
        [targets.unit]
        foreach = "tests/test_*.py"
        command = "{PY} {{path}}"
    """,
        {"tests/test_one.py": "print(1)", "tests/test_two.py": "print(2)"},
    )
    code, out, data = build(root)
    assert code == 0, out
    assert set(statuses(data)) == {"unit:tests/test_one.py", "unit:tests/test_two.py"}
    code, out, data = build(root, "unit:tests/test_two.py")
    assert set(statuses(data)) == {"unit:tests/test_two.py"}


def test_sigkill_mid_build_leaves_a_consistent_store(tmp_path):
    toml = "".join(
        f'[targets.t{i}]\ncommand = ["{PY}", "-c", "import time; time.sleep(0.05 * {i % 4})"]\n'
        for i in range(12)
    )
    root = project(tmp_path, toml)
    for delay in (0.4, 0.9, 1.5):
        proc = subprocess.Popen(
            [PY, "-m", "memotest", "build", "-j", "2"],
            cwd=root,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        time.sleep(delay)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        code, out, data = build(root)
        assert code == 0, out
        assert set(statuses(data).values()) <= {"passed", "cached"}
    data = settle(root)
    assert len(data["targets"]) == 12


def test_sigint_stops_running_targets_and_exits_130(tmp_path):
    root = project(
        tmp_path,
        """
        [targets.long]
        command = "sleep 37"
    """,
    )
    # SIGINT as a terminal delivers it, even when the suite runs as a background job
    # (which starts with SIGINT ignored, inherited by every process it starts).
    proc = subprocess.Popen(
        [PY, "-m", "memotest", "build"],
        cwd=root,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    # The sleeper is found in this build's own process tree (never machine-wide: another
    # run of the suite may be sleeping too).
    deadline = time.monotonic() + 20
    sleepers: list[int] = []
    while not sleepers and time.monotonic() < deadline:
        sleepers = [p for p in descendants(proc.pid) if running_command(p) == "sleep 37"]
        time.sleep(0.05)
    assert sleepers, "the target never started"
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=20) == 130
    assert wait_gone(sleepers, "sleep 37") == []
    _code, out, _data = build(root, "--dry-run")
    assert "would run" in out


def test_dry_run_runs_nothing(readers):
    code, out, data = build(readers, "--dry-run")
    assert code == 0
    assert "would run: never run" in out
    code, _, data = build(readers)
    assert set(statuses(data).values()) == {"passed"}


def test_dry_run_replays_nothing_and_writes_nothing(tmp_path):
    root = project(
        tmp_path,
        f"""
        [targets.gen]
        command = ["{PY}", "-c", "open('out.txt', 'w').write('made')"]
        outputs = ["out.txt"]
        [targets.reader]
        command = ["{PY}", "reader.py", "a.txt"]
        [targets.after]
        command = "true"
        needs = ["reader"]
    """,
        {"reader.py": READER, "a.txt": "A"},
    )
    settle(root)
    (root / "out.txt").unlink()
    (root / "a.txt").write_text("AA")
    store = root / ".memotest"
    before = sorted((p, p.stat().st_mtime_ns) for p in store.rglob("*") if p.is_file())
    code, out, data = build(root, "--dry-run")
    assert code == 0, out
    assert statuses(data) == {"gen": "cached", "reader": "skipped", "after": "skipped"}
    reasons = {t["name"]: t["reason"] for t in data["targets"]}
    assert reasons["reader"].startswith("would run: ") and "a.txt" in reasons["reader"]
    assert reasons["after"] == "needs reader, which skipped"
    assert not (root / "out.txt").exists()  # a dry run replays nothing
    assert sorted((p, p.stat().st_mtime_ns) for p in store.rglob("*") if p.is_file()) == before


def test_the_dry_run_runner_settles_every_target_and_starts_none():
    runner = DryRunCommandRunner()
    t = Target(name="t", command=("true",), cwd="/")
    cached = runner.settle(t, Fresh(Record("t", "passed", exit_code=0, duration=2.5)))
    assert (cached.status, cached.duration, cached.exit_code) == ("cached", 2.5, 0)
    would = runner.settle(t, Stale("new", "never run"))
    assert (would.status, would.reason) == ("skipped", "would run: never run")
    assert not runner.runs and not runner.busy and not runner.can_start(t)
    assert runner.wait() == []


def test_unknown_target_is_a_usage_error(readers):
    proc = memotest("build", "nope", cwd=readers)
    assert proc.returncode == 2
    assert "unknown target 'nope'" in proc.stderr.decode()


def test_second_build_waits_for_the_lock_or_says_so(tmp_path):
    root = project(
        tmp_path,
        """
        [targets.hold]
        command = "touch started; sleep 2"
    """,
    )
    first = subprocess.Popen(
        [PY, "-m", "memotest", "build"],
        cwd=root,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    # The first build holds the store's lock once its target runs (a fixed sleep lost
    # the race to a second build that started faster than the first under load).
    deadline = time.monotonic() + 60
    while not (root / "started").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    second = memotest("build", cwd=root)
    first.wait()
    err = second.stderr.decode()
    assert second.returncode == 0, err
    assert "waiting" in err


def test_audit_reruns_cached_targets_and_reports_memoization_errors(tmp_path):
    # A file opened through the raw system call (``syscall(SYS_openat)``) is out of the
    # tracer's sight (docs/limits.md), so a result that depends on it is a memoization
    # error waiting to happen: --audit is what finds it.
    flag = tmp_path / "flag"
    flag.write_text("ok")
    opener = (
        "import ctypes, os, sys; "
        f"fd = ctypes.CDLL(None).syscall(257, -100, b'{flag}', 0); "
        "sys.exit(os.read(fd, 16) != b'ok')"
    )
    try:
        root = project(
            tmp_path,
            f"""
            [targets.fragile]
            command = ["{PY}", "-c", "{opener}"]
            [targets.solid]
            command = ["{PY}", "-c", "pass"]
            """,
        )
        settle(root)
        code, out, data = build(root, "--audit", "1", "--audit-seed", "7")
        assert code == 0, out
        assert data["summary"]["cached"] == 0
        assert data["audit"]["seed"] == 7 and data["audit"]["errors"] == []
        assert "audit: re-ran 2 cached target(s) (seed 7): all agreed" in out
        flag.write_text("changed behind memotest's back")
        code, out, data = build(root, "--audit", "1")
        assert code == 1, out
        assert "memoization error: fragile was cached as passed" in out
        assert len(data["audit"]["errors"]) == 1
    finally:
        flag.unlink()


def test_audit_fraction_must_be_between_0_and_1(readers):
    proc = memotest("build", "--audit", "2", cwd=readers)
    assert proc.returncode == 2
    assert "must be between 0 and 1" in proc.stderr.decode()


def test_symlink_into_proc_is_not_an_input(tmp_path):
    # /etc/mtab is a link to /proc/self/mounts, whose mtime is always "now".
    root = project(
        tmp_path,
        f"""
        [targets.mtab]
        command = ["{PY}", "-c", "open('/etc/mtab').read()"]
        """,
    )
    if not os.path.islink("/etc/mtab"):
        pytest.skip("/etc/mtab is not a symlink here")
    settle(root)


def test_pytest_tmp_path_does_not_make_a_target_uncacheable(tmp_path):
    # pytest resolves its temp root, which stats the parent of the private TMPDIR.
    root = project(
        tmp_path,
        f"""
        [targets.t]
        command = ["{PY}", "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_tmp.py"]
        """,
        {"test_tmp.py": "def test_a(tmp_path):\n    (tmp_path / 'x').write_text('1')\n"},
    )
    settle(root)
