"""The tox and nox rows of issue 25: a project in git whose tests run pytest-benchmark.

One small package (``setuptools``, a console script), its tests using pytest-benchmark's
``benchmark`` fixture and saving the results (``--benchmark-json``), so that
pytest-benchmark runs ``git describe --dirty``, ``git show`` and ``git rev-parse`` for the
commit information and ``python -m cpuinfo`` for the machine's: every run stats every
tracked file and refreshes the git index. tox and nox install the package, pytest and
pytest-benchmark from the machine's package index (no network), in real envs.

Rows (each a memoized run; ``R`` replayed, ``r`` ran):

* **tox**: runs 1, 2, 3; then ``git checkout`` to another commit and back (the same
  files, newer, a rewritten ``HEAD`` and index): must replay; then a README edit: must
  re-run with ``explain`` naming the README's content (``git describe --dirty`` compares
  it), never a modification-time order; then the next run: must replay (settled).
* **nox**: runs 1, 2, 3 of a ``@memoized`` session that installs the package (nox remakes
  the venv at each start: the console script and every installed file are written
  again); then the same checkout and back.

Goals: after the run that finds its own leftovers (run 2: ``.benchmarks``, the JSON
report, ``docs/limits.md``'s "A run's own leftovers"), every row replays but the README
edit's, which re-runs by content and settles at the next run.

Run (from ``benchmarks/adapters.py --git``), with the Python whose venv has tox, nox and
memotest::

    python benchmarks/adapters.py --git

Writes ``benchmarks/results/adapters-git.json``.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

WORK = Path(
    os.environ.get("MEMOTEST_BENCH_WORK") or Path(tempfile.gettempdir()) / "memotest-adapters"
)
BIN = Path(sys.executable).parent

FILES = {
    "pyproject.toml": """
        [build-system]
        requires = ["setuptools>=61"]
        build-backend = "setuptools.build_meta"

        [project]
        name = "demo"
        version = "0.1"

        [project.scripts]
        demo = "demo:main"
        """,
    "src/demo/__init__.py": """
        def area(n):
            return n * n


        def main():
            print(area(3))
        """,
    "tests/test_area.py": """
        import shutil
        import subprocess

        from demo import area


        def test_area(benchmark):
            assert benchmark(area, 2) == 4


        def test_console_script():
            out = subprocess.run([shutil.which("demo")], capture_output=True, text=True)
            assert out.stdout == "9\\n"
        """,
    "tox.ini": """
        [tox]
        env_list = py
        [testenv]
        deps =
            pytest
            pytest-benchmark
        commands =
            pytest -q -p no:cacheprovider --benchmark-json={env_tmp_dir}/bench.json tests
        """,
    "noxfile.py": """
        import nox
        from memotest_nox import memoized


        @nox.session
        @memoized
        def tests(session):
            session.install(".", "pytest", "pytest-benchmark")
            session.run("pytest", "-q", "-p", "no:cacheprovider",
                        "--benchmark-json=bench.json", "tests")
        """,
    "README.md": "# demo\n",
    "LICENCE": "licence\n",
    ".gitignore": ".tox/\n.nox/\n.memotest/\n__pycache__/\n*.egg-info/\nbuild/\nbench.json\n",
}


def environment() -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("MEMOTEST", "VIRTUAL_ENV", "TOX", "NOX", "PYTEST"))
    }
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    env |= {"NO_COLOR": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    env["TOX_USER_CONFIG_FILE"] = os.devnull
    env |= {"GIT_CONFIG_NOSYSTEM": "1", "GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@b"}
    env |= {"GIT_COMMITTER_NAME": "b", "GIT_COMMITTER_EMAIL": "b@b"}
    return env


def git(root: Path, env: dict, *args: str) -> None:
    subprocess.run(["git", *args], cwd=root, env=env, check=True, capture_output=True)


def project(name: str, env: dict) -> Path:
    """A fresh git repository with two commits (``main``, ``other``: another README)."""
    root = WORK / f"git-rows-{name}"
    shutil.rmtree(root, ignore_errors=True)
    for rel, text in FILES.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(textwrap.dedent(text).lstrip("\n"))
    git(root, env, "init", "-q", "-b", "main")
    git(root, env, "add", "-A")
    git(root, env, "commit", "-qm", "one")
    git(root, env, "checkout", "-q", "-b", "other")
    (root / "README.md").write_text("# demo, other\n")
    git(root, env, "commit", "-qam", "two")
    git(root, env, "checkout", "-q", "main")
    return root


#: tox's summary line: "py: OK (8.15=setup[7.13]+cmd[1.02] seconds)"
TOX_CMD = re.compile(r"\+cmd\[([\d.]+)\]")


def step(tool: str, root: Path, env: dict) -> dict:
    cmd = [str(BIN / "tox"), "-e", "py"] if tool == "tox" else [str(BIN / "nox"), "-s", "tests"]
    t0 = time.monotonic()
    proc = subprocess.run(
        cmd, cwd=root, env=env, capture_output=True, text=True, timeout=900, errors="replace"
    )
    wall = time.monotonic() - t0
    out = proc.stdout + proc.stderr
    notes = [ln.split("memotest: ", 1)[1] for ln in out.splitlines() if "memotest: " in ln]
    m = TOX_CMD.search(out)
    return {
        "exit": proc.returncode,
        "wall": round(wall, 2),
        "cmd": float(m.group(1)) if m else None,
        "replayed": bool(notes) and all("cached, replayed" in n for n in notes),
        "note": notes[-1] if notes else "",
    }


def rows(tool: str) -> list[dict]:
    env = environment()
    root = project(tool, env)
    out: list[dict] = []

    def do(name: str, want: bool | None) -> None:
        r = step(tool, root, env) | {"step": name, "tool": tool, "want_replay": want}
        out.append(r)
        print(f"  {tool} {name}: {r['wall']} s, {'R' if r['replayed'] else 'r'}: {r['note']}")

    do("run 1", False)
    do("run 2", None)  # the run's own leftovers: may run once
    do("run 3", True)
    git(root, env, "checkout", "-q", "other")
    git(root, env, "checkout", "-q", "main")
    do("checkout and back", True)
    if tool == "tox":
        with (root / "README.md").open("a") as f:
            f.write("more\n")
        target = "tox:py"
        explain = subprocess.run(
            [str(BIN / "memotest"), "explain", "-v", target],
            cwd=root,
            env=env,
            capture_output=True,
            text=True,
        ).stdout
        do("README edit", False)
        out[-1]["explain"] = explain.splitlines()[:4]
        out[-1]["by_content"] = "README.md: content changed" in explain
        out[-1]["by_order"] = "modification-time order" in explain
        do("after the edit", True)
    return out


def goal(r: dict) -> bool:
    if r["exit"] != 0:
        return False
    if r.get("by_order"):
        return False
    if r["want_replay"] is None:
        return True
    return r["replayed"] == r["want_replay"] and r.get("by_content", True)


def run_all() -> list[dict]:
    got: list[dict] = []
    for tool in ("tox", "nox"):
        print(f"{tool}: a git project whose pytest-benchmark runs git")
        got += rows(tool)
    for r in got:
        r["goal"] = goal(r)
    return got


def print_rows(got: list[dict]) -> None:
    head = f"{'tool':5} {'step':20} {'wall':>7} {'cmd':>7}  ran  goal  why"
    print("\n" + head + "\n" + "-" * len(head))
    for r in got:
        cmd = f"{r['cmd']:6.2f}s" if r["cmd"] is not None else "      -"
        print(
            f"{r['tool']:5} {r['step']:20} {r['wall']:6.2f}s {cmd}  "
            f"{'R' if r['replayed'] else 'r':3}  {'ok' if r['goal'] else 'FAIL':4}  "
            f"{r['note'][:90]}"
        )
    print(
        "\nwall: the tool's whole run (tox: its package build and install too; nox: the venv "
        "remade); cmd: tox's commands' time; R replayed, r ran"
    )
