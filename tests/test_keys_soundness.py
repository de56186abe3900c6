"""What a record is keyed by besides the definition and the passed variables: the settings
that shape what it holds (``memotest/check/keys.py``'s ``shaping``) and the process state a
target inherits (``memotest/check/keys.py``'s ``process_state``). Real builds, real edits."""

from __future__ import annotations

import os
import sys
import textwrap
from pathlib import Path

from conftest import build_statuses, memotest, write_tree


def _explain(proj: Path, name: str, env: dict | None = None) -> str:
    proc = memotest("explain", name, cwd=proj, env=env)
    return proc.stdout.decode() + proc.stderr.decode()


def test_removing_an_ignore_pattern_re_records(tmp_path):
    proj = write_tree(
        tmp_path / "proj",
        {
            "memotest.toml": """
                [settings]
                ignore = ["data/**"]

                [targets.t]
                command = "cat data/x.txt src.txt"
            """,
            "data/x.txt": "1\n",
            "src.txt": "s\n",
        },
    )
    assert build_statuses(proj)[2] == {"t": "passed"}
    (proj / "data/x.txt").write_text("2\n")
    assert build_statuses(proj)[2] == {"t": "cached"}  # ignored: not an input
    toml = proj / "memotest.toml"
    toml.write_text(toml.read_text().replace('ignore = ["data/**"]', "ignore = []"))
    assert "the settings that shape records changed: ignore" in _explain(proj, "t")
    assert build_statuses(proj)[2] == {"t": "passed"}
    # The new record holds data/x.txt.
    (proj / "data/x.txt").write_text("3\n")
    assert build_statuses(proj)[2] == {"t": "passed"}
    # Ignoring more than the record was made with keeps it: its inputs are a superset.
    toml.write_text(toml.read_text().replace("ignore = []", 'ignore = ["data/**", "z/**"]'))
    assert build_statuses(proj)[2] == {"t": "cached"}


def test_a_plugin_that_dropped_inputs_is_part_of_the_key(tmp_path):
    site = write_tree(
        tmp_path / "site",
        {
            "memotest_drop.py": """
                from memotest.hookspecs import hookimpl

                @hookimpl
                def memotest_is_input(path, target):
                    return False if path.endswith("dropped.txt") else None
            """
        },
    )
    proj = write_tree(
        tmp_path / "proj",
        {
            "memotest.toml": '[targets.t]\ncommand = "cat dropped.txt"\n',
            "dropped.txt": "1\n",
        },
    )
    env = dict(os.environ, PYTHONPATH=str(site), MEMOTEST_PLUGINS="memotest_drop")
    assert build_statuses(proj, env=env)[2] == {"t": "passed"}
    (proj / "dropped.txt").write_text("2\n")
    assert build_statuses(proj, env=env)[2] == {"t": "cached"}
    bare = dict(env, MEMOTEST_PLUGINS="")
    assert "the settings that shape records changed: is_input" in _explain(proj, "t", bare)
    assert build_statuses(proj, env=bare)[2] == {"t": "passed"}
    # A record made without the plugin has more inputs: reused with it.
    assert build_statuses(proj, env=env)[2] == {"t": "cached"}


def _state_project(tmp_path: Path, script: str) -> Path:
    return write_tree(
        tmp_path / "proj",
        {
            "memotest.toml": f'[targets.t]\ncommand = "{sys.executable} probe.py"\n',
            "probe.py": textwrap.dedent(script),
        },
    )


def _with_preexec(proj: Path, preexec: str, *args: str) -> dict[str, str]:
    """``memotest build ARGS`` started by a Python that first runs ``preexec``."""
    runner = textwrap.dedent(f"""
        import os, resource, signal, subprocess, sys
        {preexec}
        sys.exit(subprocess.call([sys.executable, "-m", "memotest", "build",
                                  "--json-report", "r.json", *sys.argv[1:]]))
    """)
    import json
    import subprocess

    subprocess.run([sys.executable, "-c", runner, *args], cwd=proj, check=False)
    report = proj / "r.json"
    out = {t["name"]: t["status"] for t in json.loads(report.read_text())["targets"]}
    report.unlink()
    return out


def test_the_umask_is_part_of_the_key(tmp_path):
    proj = _state_project(
        tmp_path,
        """
        import os
        m = os.umask(0); os.umask(m)
        assert m == 0o022, oct(m)
        """,
    )
    assert _with_preexec(proj, "os.umask(0o022)") == {"t": "passed"}
    assert _with_preexec(proj, "os.umask(0o022)") == {"t": "cached"}
    assert _with_preexec(proj, "os.umask(0o077)") == {"t": "failed"}


def test_resource_limits_are_part_of_the_key(tmp_path):
    proj = _state_project(
        tmp_path,
        """
        import resource
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        assert soft >= 200, soft
        """,
    )
    import resource

    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    high = f"resource.setrlimit(resource.RLIMIT_NOFILE, ({min(hard, 1024)}, {hard}))"
    low = f"resource.setrlimit(resource.RLIMIT_NOFILE, (100, {hard}))"
    assert _with_preexec(proj, high) == {"t": "passed"}
    assert _with_preexec(proj, high) == {"t": "cached"}
    assert _with_preexec(proj, low) == {"t": "failed"}


def test_ignored_signals_are_part_of_the_key(tmp_path):
    proj = _state_project(
        tmp_path,
        """
        import signal
        assert signal.getsignal(signal.SIGUSR1) == signal.SIG_DFL
        """,
    )
    # Each case sets the disposition itself: the suite may run under nohup (SIGHUP ignored).
    assert _with_preexec(proj, "signal.signal(signal.SIGUSR1, signal.SIG_DFL)") == {"t": "passed"}
    assert _with_preexec(proj, "signal.signal(signal.SIGUSR1, signal.SIG_IGN)") == {"t": "failed"}


def test_what_nohup_and_a_background_job_ignore_every_run_gets_at_its_default(tmp_path):
    """SIGHUP (nohup), SIGINT and SIGQUIT (a background job) are not keyed: the attack is
    a run that would see them ignored. It must see them at their default, so that the
    record made under nohup is the one a normal shell replays (memotest/run/signals.py)."""
    proj = _state_project(
        tmp_path,
        """
        import signal
        for sig in (signal.SIGHUP, signal.SIGINT, signal.SIGQUIT):
            assert signal.getsignal(sig) != signal.SIG_IGN, sig
        print(open("/proc/self/status").read().split("SigIgn:")[1].split()[0])
        """,
    )
    nohup = "; ".join(
        f"signal.signal(signal.{s}, signal.SIG_IGN)" for s in ("SIGHUP", "SIGINT", "SIGQUIT")
    )
    normal = "; ".join(
        f"signal.signal(signal.{s}, signal.SIG_DFL)" for s in ("SIGHUP", "SIGINT", "SIGQUIT")
    )
    assert _with_preexec(proj, nohup) == {"t": "passed"}
    assert _with_preexec(proj, normal) == {"t": "cached"}


def test_the_real_working_folder_is_part_of_the_key(tmp_path):
    """The same path, another folder: ``os.getcwd()`` names the folder the link points to.

    Keyed under the project root (``@project/a``, :mod:`memotest.world.roots`), so the link and
    its two targets are in the project: a copy of the whole project at another path is
    the same folder (``tests/test_portable.py``; ``docs/limits.md``)."""
    proj = tmp_path / "proj"
    write_tree(
        proj,
        {
            "memotest.toml": f'[targets.t]\ncommand = "{sys.executable} probe.py"\ncwd = "cur"\n',
            "a/probe.py": "import os\nassert os.getcwd().endswith('/a'), os.getcwd()\n",
            "b/probe.py": "import os\nassert os.getcwd().endswith('/a'), os.getcwd()\n",
        },
    )
    link = proj / "cur"
    link.symlink_to(proj / "a")
    assert build_statuses(proj)[2] == {"t": "passed"}
    assert build_statuses(proj)[2] == {"t": "cached"}
    link.unlink()
    link.symlink_to(proj / "b")
    assert build_statuses(proj)[2] == {"t": "failed"}


def test_the_c_librarys_own_signals_are_not_keyed():
    """glibc's 32 and 33 (below SIGRTMIN) change disposition when a process starts a
    thread: keying them made one memotest-sh process compute two keys for one run."""
    import signal

    from memotest.check.keys import _signals

    reserved = sum(1 << (n - 1) for n in range(32, int(signal.SIGRTMIN)))
    assert _signals(reserved) == ""
    assert _signals(reserved | 1 << (int(signal.SIGHUP) - 1)) == str(int(signal.SIGHUP))
