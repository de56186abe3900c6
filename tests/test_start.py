"""memotest's start stays cheap: what ``--version`` and a no-op build import, and the entry
point search that replaced ``importlib.metadata`` (``memotest/load/entrypoints.py``).

The suite and CI run ``memotest build`` thousands of times, most of them no-ops; their start
is most of their CPU (``benchmarks/noop_start.py``, docs/benchmarks.md). These tests fail
when a module that only some commands need comes back on those paths.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from importlib.metadata import entry_points as metadata_entry_points
from pathlib import Path

from conftest import memotest

from memotest.load.entrypoints import entry_points

#: What no no-op build imports: each is imported by the path that needs it.
NOT_ON_A_NOOP = (
    "importlib.metadata",  # the plugins' entry points: memotest/load/entrypoints.py
    "email",
    "yaml",  # a memotest.yaml only
    "http.client",  # a remote cache only
    "ssl",
    "socket",  # a sink, an endpoint or a host name to check
    "psutil",  # a run being watched
    "ctypes",
    "concurrent.futures",  # a run
    "xml.etree.ElementTree",  # --junit
    "statistics",  # --shard
    "configparser",  # a tox.ini
    "difflib",  # a mistake to name
)
#: And what --version or --help imports neither: no plugin, no build.
NOT_ON_VERSION = (*NOT_ON_A_NOOP, "pluggy", "memotest.load.plugins", "memotest.store", "sqlite3")

REPORT = """
import json, runpy, sys
sys.argv = ["memotest", *sys.argv[1:]]
try:
    runpy.run_module("memotest", run_name="__main__")
except SystemExit as exc:
    code = exc.code
print(json.dumps({"exit": code, "modules": sorted(sys.modules)}), file=sys.stderr)
"""


def imported(cwd: Path, *args: str) -> tuple[int, set[str], str]:
    """(exit status, the modules a memotest command line imported that ``python -c pass``
    does not, its stdout), the command run in a fresh interpreter."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMOTEST_")}
    bare = subprocess.run(
        [sys.executable, "-c", "import json, sys; print(json.dumps(sorted(sys.modules)))"],
        cwd=cwd,
        env=env,
        capture_output=True,
        check=True,
    )
    proc = subprocess.run(
        [sys.executable, "-c", REPORT, *args], cwd=cwd, env=env, capture_output=True
    )
    report = json.loads(proc.stderr.decode().strip().splitlines()[-1])
    return (
        report["exit"],
        set(report["modules"]) - set(json.loads(bare.stdout)),
        proc.stdout.decode(),
    )


def loaded(modules: set[str], names: tuple[str, ...]) -> list[str]:
    return [n for n in names if n in modules or any(m.startswith(n + ".") for m in modules)]


def test_version_and_help_load_no_plugin_and_no_build(tmp_path):
    for args in (["--version"], ["--help"], []):
        code, modules, out = imported(tmp_path, *args)
        assert code in (0, 2), (args, code)
        assert loaded(modules, NOT_ON_VERSION) == [], args
    assert out == "" and "memotest" in imported(tmp_path, "--version")[2]


def test_a_noop_build_imports_only_what_it_uses(tmp_path):
    (tmp_path / "memotest.toml").write_text(
        '[targets.a]\ncommand = "cat data.txt"\n[targets.b]\ncommand = "true"\n'
    )
    (tmp_path / "data.txt").write_text("x\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMOTEST_")}
    first = memotest("build", cwd=tmp_path, env=env)
    assert first.returncode == 0, first.stderr.decode()
    code, modules, out = imported(tmp_path, "build")
    assert code == 0
    assert "2 cached" in out.splitlines()[-1]  # a no-op: every observation checked
    assert loaded(modules, NOT_ON_A_NOOP) == []
    (tmp_path / "data.txt").write_text("changed\n")  # the same path, not a no-op: runs
    code, modules, out = imported(tmp_path, "build")
    assert code == 0 and "1 passed, 1 cached" in out.splitlines()[-1]
    assert "psutil" in modules  # what a run needs is imported when it runs


def dist(site: Path, folder: str, text: str | None) -> None:
    (site / folder).mkdir(parents=True)
    name = folder.split("-")[0]
    (site / folder / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1\n")
    if text is not None:
        (site / folder / "entry_points.txt").write_text(textwrap.dedent(text))


def same_as_importlib_metadata(groups: tuple[str, ...]) -> None:
    for group in groups:
        ours = [(e.name, e.value, e.group) for e in entry_points(group)]
        theirs = [(e.name, e.value, e.group) for e in metadata_entry_points(group=group)]
        assert ours == theirs, group


def test_entry_points_are_those_importlib_metadata_finds(tmp_path, monkeypatch):
    first, second = tmp_path / "first", tmp_path / "second"
    # Two versions of one distribution, its name spelled three ways: the first found wins.
    dist(first, "my_plugin-2.0.dist-info", "[memotest]\nmine = my.plugin:two\n")
    dist(first, "My.Plugin-1.0.dist-info", "[memotest]\nmine = my.plugin:one\n")
    dist(second, "my-plugin-3.0.dist-info", "[memotest]\nmine = my.plugin:three\n")
    dist(
        second,
        "other-1.0.dist-info",
        """
        # a comment
        [console_scripts]
        tool = other.cli:main
        [memotest]
          spaced  =  other.plugin : hooks [extra]
        second=other.second
        """,
    )
    dist(second, "bare-1.0.egg-info", None)  # no entry points at all
    (second / "loose.egg-info").write_text("Metadata-Version: 1.0\nName: loose\n")  # a file
    monkeypatch.syspath_prepend(str(second))
    monkeypatch.syspath_prepend(str(first))
    monkeypatch.syspath_prepend(str(tmp_path / "not-there"))
    same_as_importlib_metadata(("memotest", "console_scripts", "pytest11", "tox"))
    names = [(e.name, e.value) for e in entry_points("memotest")]
    assert ("mine", "my.plugin:two") in names and (
        "spaced",
        "other.plugin : hooks [extra]",
    ) in names
    # A suffix not in lower case is named differently by importlib.metadata: handed over.
    dist(second, "Upper-1.0.DIST-INFO", "[memotest]\nupper = upper.plugin\n")
    same_as_importlib_metadata(("memotest",))


def test_an_entry_point_loads_what_its_value_names():
    (ep,) = [e for e in entry_points("memotest") if e.name == "tox"]
    assert ep.load().__name__ == "memotest_tox.plugin"
