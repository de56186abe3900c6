"""The tox adapter end to end: real tox 4, real memotest, real processes.

The tox plugin (``tox -e NAME`` memoizes the env's commands) and the loader (``memotest
build --from tox``). Commands prove whether they ran by appending to a counter file outside
the project, which a replay would not touch.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import memotest

PY = sys.executable

pytestmark = [
    pytest.mark.skipif(
        subprocess.run([PY, "-c", "import tox"], capture_output=True).returncode != 0,
        reason="tox is not installed",
    ),
    pytest.mark.skipif(
        "MEMOTEST_TRACE_DIR" in os.environ,
        reason="under an outer memotest tracer the tox plugin runs commands plainly, by design",
    ),
]


def environ(**extra: str) -> dict[str, str]:
    env = dict(os.environ, PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_NO_INDEX="1", NO_COLOR="1")
    for name in ("PYTHONHASHSEED", "TOX_HASHSEED", "TOXHASHSEED", "TOX_ENV", "TOXENV"):
        env.pop(name, None)  # tox must make up its random seed, and read -e
    env["TOX_USER_CONFIG_FILE"] = os.devnull
    env.update(extra)
    return env


def write(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(textwrap.dedent(text).lstrip("\n"))
    return root


def tox(root: Path, *args: str, env: dict | None = None) -> tuple[int, str]:
    proc = subprocess.run(
        [PY, "-m", "tox", *args],
        cwd=root,
        env=env or environ(),
        capture_output=True,
        text=True,
        timeout=240,
    )
    return proc.returncode, proc.stdout + proc.stderr


def count(counter: Path) -> int:
    return len(counter.read_text()) if counter.exists() else 0


def bump(counter: Path) -> str:
    """A tox command line that appends one character to ``counter``."""
    return f"python -c \"open(r'{counter}', 'a').write('x')\""


@pytest.fixture
def proj(tmp_path: Path) -> tuple[Path, Path]:
    """A skip_install project whose ``py`` env reads data.txt and bumps a counter."""
    counter = tmp_path / "counter"
    return write(tmp_path / "proj", proj_files(counter)), counter


def proj_files(counter: Path) -> dict[str, str]:
    """The files of :func:`proj`: its ``py`` env bumps ``counter`` and prints data.txt."""
    return {
        "tox.ini": f"""
            [tox]
            env_list = py
            [testenv]
            skip_install = true
            commands =
                {bump(counter)}
                python read.py data.txt
            """,
        "read.py": """
            import sys
            print("content:", open(sys.argv[1]).read().strip())
            """,
        "data.txt": "one\n",
    }


def test_second_run_is_cached_and_replays_the_log_an_edit_of_a_read_file_reruns(proj):
    root, counter = proj
    code, out = tox(root, "-e", "py")
    assert code == 0, out
    assert count(counter) == 1
    assert "content: one" in out
    assert "memotest: ran: never run (no record)" in out
    code, out = tox(root, "-e", "py")
    assert code == 0, out
    assert count(counter) == 1, "a cached env must not run its commands"
    assert "content: one" in out  # the recorded log, replayed
    assert "memotest: cached, replayed (saved" in out
    assert "py: OK" in out and "congratulations" in out
    (root / "data.txt").write_text("two\n")
    code, out = tox(root, "-e", "py")
    assert code == 0, out
    assert count(counter) == 2
    assert "content: two" in out
    assert f"memotest: ran: {root / 'data.txt'}: content changed" in out
    assert tox(root, "-e", "py")[0] == 0
    assert count(counter) == 2


def test_a_failing_env_fails_and_runs_again_command_semantics_are_kept(tmp_path):
    """Two envs of one project, each its own counter. ``failing``: it fails tox, runs
    again, and its ``commands_post`` runs. ``semantics``: ``-`` ignores an exit code, ``!``
    inverts it, pre/post wrap the commands, and the three sets are replayed together."""
    failing, semantics = tmp_path / "counter-failing", tmp_path / "counter-semantics"
    root = write(
        tmp_path / "proj",
        {
            "tox.ini": f"""
                [tox]
                env_list = failing, semantics
                [testenv]
                skip_install = true
                [testenv:failing]
                commands =
                    {bump(failing)}
                    python -c "print('boom-output'); raise SystemExit(4)"
                    python -c "print('never-reached')"
                commands_post = python -c "print('post-ran')"
                [testenv:semantics]
                change_dir = sub
                commands_pre = python -c "print('sem-pre-ran')"
                commands =
                    - python -c "raise SystemExit(3)"
                    ! python -c "raise SystemExit(5)"
                    {bump(semantics)}
                    python -c "import os; print('cwd', os.path.basename(os.getcwd()))"
                commands_post = python -c "print('sem-post-ran')"
                """,
        },
    )
    for runs in (1, 2):
        code, out = tox(root)
        assert code != 0, out
        assert count(failing) == runs, out
        assert "boom-output" in out and "\npost-ran" in out, out
        assert "never-reached\n" not in out, out
        assert "failing: FAIL code 4" in out, out
        assert count(semantics) == 1, out
        assert "sem-pre-ran\n" in out and "sem-post-ran\n" in out and "cwd sub" in out, out
        assert "semantics: OK" in out, out
    assert "memotest: ran: last run failed (exit code 4)" in out
    assert "memotest: cached" in out


def test_memotest_false_env_always_runs_and_force_runs(tmp_path):
    counter = tmp_path / "counter"
    other = tmp_path / "other"
    root = write(
        tmp_path / "proj",
        {
            "tox.ini": f"""
                [tox]
                env_list = plain, memo
                [testenv]
                skip_install = true
                [testenv:plain]
                memotest = false
                commands = {bump(counter)}
                [testenv:memo]
                commands = {bump(other)}
                """,
        },
    )
    for runs in (1, 2):
        code, out = tox(root, "-e", "plain,memo")
        assert code == 0, out
        assert count(counter) == runs
        assert count(other) == 1
    assert "memotest:" not in out.split("memo: commands")[0]  # plain ran as tox runs it
    code, out = tox(root, "-e", "memo", "--memotest-force")
    assert code == 0, out
    assert count(other) == 2
    assert "memotest: ran: forced" in out
    code, out = tox(root, "-e", "memo", "--no-memotest")
    assert code == 0, out
    assert count(other) == 3
    assert tox(root, "-e", "memo")[0] == 0
    assert count(other) == 3  # the forced run's record still holds


def test_an_unreadable_memotest_setting_fails_the_env_with_nothing_run(tmp_path):
    counter = tmp_path / "counter"
    root = write(
        tmp_path / "proj",
        {
            "tox.ini": f"""
                [tox]
                env_list = py
                [testenv]
                skip_install = true
                memotest = maybe
                commands = {bump(counter)}
                """,
        },
    )
    code, out = tox(root, "-e", "py")
    assert code != 0
    assert f"memotest-tox: {root / 'tox.ini'}:5: [testenv:py] memotest:" in out
    assert "'maybe'" in out
    assert not counter.exists()


def test_random_hashseed_does_not_defeat_the_cache_but_a_chosen_one_is_keyed(tmp_path):
    counter = tmp_path / "counter"
    root = write(
        tmp_path / "proj",
        {
            "tox.ini": f"""
                [tox]
                env_list = py
                [testenv]
                skip_install = true
                commands =
                    {bump(counter)}
                    python -c "import os; print('SEED', os.environ['PYTHONHASHSEED'])"
                """,
        },
    )
    code, first = tox(root, "-e", "py")
    assert code == 0, first
    seed = re.search(r"^SEED (\d+)$", first, re.M)
    assert seed, first  # tox's random seed reaches the commands
    code, out = tox(root, "-e", "py")
    assert code == 0, out
    assert count(counter) == 1
    assert f"SEED {seed.group(1)}\n" in out  # the recorded run, replayed
    # A seed the user chose is part of the key.
    assert tox(root, "-e", "py", "--hashseed", "7")[0] == 0
    assert count(counter) == 2
    code, out = tox(root, "-e", "py", "--hashseed", "7")
    assert code == 0 and "SEED 7\n" in out
    assert count(counter) == 2
    code, out = tox(root, "-e", "py", "--hashseed", "8")
    assert code == 0 and "SEED 8\n" in out
    assert count(counter) == 3
    assert "memotest: ran: environment changed: PYTHONHASHSEED" in out


def test_parallel_envs_are_each_memoized(tmp_path):
    counters = {name: tmp_path / f"counter-{name}" for name in ("a", "b")}
    root = write(
        tmp_path / "proj",
        {
            "tox.ini": f"""
                [tox]
                env_list = a, b
                [testenv]
                skip_install = true
                [testenv:a]
                commands = {bump(counters["a"])}
                [testenv:b]
                commands = {bump(counters["b"])}
                """,
        },
    )
    for _ in range(2):
        code, out = tox(root, "-p", "2", "-e", "a,b")
        assert code == 0, out
    assert {n: count(c) for n, c in counters.items()} == {"a": 1, "b": 1}


def test_a_broken_tox_ini_runs_nothing(proj):
    root, counter = proj
    ini = root / "tox.ini"
    ini.write_text(ini.read_text().replace("[testenv]", "[testenv"))
    code, out = tox(root, "-e", "py")
    assert code != 0
    assert str(ini) in out and "line  3" in out
    assert not counter.exists()
    proc = memotest("build", "-f", "tox.ini", cwd=root)
    err = proc.stderr.decode()
    assert proc.returncode == 2, err
    assert f"tox: {ini}:3: cannot read the tox configuration" in err
    assert not counter.exists()


def test_loader_runs_tox_envs_as_targets(proj):
    root, counter = proj
    for _ in range(3):  # the first build's record includes creating .tox: not reusable
        code, out = run_build(root, "--from", "tox")
        assert code == 0, out
    assert count(counter) == 2
    assert "(cached) PASSED py" in out


def run_build(root: Path, *args: str) -> tuple[int, str]:
    proc = memotest("build", *args, cwd=root, env=environ())
    return proc.returncode, proc.stdout.decode() + proc.stderr.decode()


def test_tox_under_an_outer_memotest_is_not_memoized_twice(proj):
    """``memotest build`` holds the store lock and traces tox: the plugin must step aside
    (no nested store use, no commands hidden from the outer tracer)."""
    root, counter = proj
    (root / "memotest.toml").write_text(
        f'[targets.t]\ncommand = ["{PY}", "-m", "tox", "-e", "py"]\n'
    )
    code, out = run_build(root, "-v")
    assert code == 0, out
    assert count(counter) == 1
    code, out = tox(root, "-e", "py")  # tox alone: its own record did not exist yet
    assert "memotest: ran: never run (no record)" in out
    assert count(counter) == 2


BACKEND = """
import base64, hashlib, os, zipfile

NAME, VERSION = "demo", "0.1"
DIST = f"{NAME}-{VERSION}.dist-info"


def _record_line(name, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    files = {}
    for folder, _, names in os.walk(os.path.join("src", NAME)):
        for n in sorted(names):
            if n.endswith(".py"):
                path = os.path.join(folder, n)
                files[os.path.relpath(path, "src")] = open(path, "rb").read()
    meta = f"Metadata-Version: 2.1\\nName: {NAME}\\nVersion: {VERSION}\\n"
    files[f"{DIST}/METADATA"] = meta.encode()
    wheel = "Wheel-Version: 1.0\\nGenerator: t\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n"
    files[f"{DIST}/WHEEL"] = wheel.encode()
    record = [_record_line(n, d) for n, d in files.items()] + [f"{DIST}/RECORD,,"]
    files[f"{DIST}/RECORD"] = ("\\n".join(record) + "\\n").encode()
    wheel = f"{NAME}-{VERSION}-py3-none-any.whl"
    with zipfile.ZipFile(os.path.join(wheel_directory, wheel), "w") as z:
        for n, d in files.items():
            z.writestr(n, d)  # stamped with the build time: the archive differs each build
    return wheel
"""


def test_installed_project_is_cached_on_the_second_run(tmp_path):
    """Slower (about 10 s): tox builds the project and installs it into the env on every
    run. The reinstall rewrites identical files, except ``direct_url.json`` (a per-run
    staging path and the hash of a freshly built archive) and ``RECORD`` (its hash); the
    commands read both, and the result is still reused. Changed code runs them again."""
    counter = tmp_path / "counter"
    check = (
        "import demo, importlib.metadata as m; "
        "d = m.distribution('demo'); d.read_text('direct_url.json'); "
        "print('demo', demo.X, d.version, len(d.files))"
    )
    root = write(
        tmp_path / "proj",
        {
            "pyproject.toml": """
                [build-system]
                requires = []
                build-backend = "backend"
                backend-path = ["."]
                """,
            "backend.py": BACKEND,
            "src/demo/__init__.py": "X = 1\n",
            "tox.ini": f"""
                [tox]
                env_list = py
                [testenv]
                package = wheel
                commands =
                    {bump(counter)}
                    python -c "{check}"
                """,
        },
    )
    code, out = tox(root, "-e", "py")
    assert code == 0, out
    assert "demo 1 0.1" in out
    site = next((root / ".tox" / "py").glob("lib/python*/site-packages"))
    before = snapshot(site)
    code, out = tox(root, "-e", "py")
    assert code == 0, out
    assert "install_package" in out  # tox did reinstall
    assert count(counter) == 1, out
    assert "memotest: cached, replayed" in out
    after = snapshot(site)
    changed = {p for p in before.keys() | after.keys() if before.get(p) != after.get(p)}
    assert changed <= {"demo-0.1.dist-info/direct_url.json", "demo-0.1.dist-info/RECORD"}
    (root / "src" / "demo" / "__init__.py").write_text("X = 2\n")
    code, out = tox(root, "-e", "py")
    assert code == 0, out
    assert "demo 2 0.1" in out
    assert count(counter) == 2


def snapshot(site: Path) -> dict[str, str]:
    return {
        str(p.relative_to(site)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in site.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    }


def test_example_project_lint_env_is_memoized(tmp_path):
    example = Path(__file__).resolve().parents[2] / "examples" / "tox"
    root = tmp_path / "example"
    skip = shutil.ignore_patterns(".tox", ".memotest", "__pycache__", "*.egg-info", "build")
    shutil.copytree(example, root, ignore=skip)
    code, out = tox(root, "-e", "lint")
    assert code == 0, out
    assert "memotest: ran" in out
    code, out = tox(root, "-e", "lint")
    assert code == 0, out
    assert "memotest: cached, replayed" in out


def test_a_copy_of_the_project_with_its_tox_envs_replays(proj, tmp_path):
    """Portable records (``memotest/world/roots.py``): the env under ``.tox/`` is in the project
    root, so the command (its python, the seq argument) and the variables tox sets
    (``PATH``, ``VIRTUAL_ENV``, ``TOX_ENV_DIR``) are keyed as ``@project/...``."""
    root, counter = proj
    assert tox(root, "-e", "py")[0] == 0
    copy = tmp_path / "elsewhere" / "proj"
    shutil.copytree(root, copy, symlinks=True)
    code, out = tox(copy, "-e", "py")
    assert code == 0, out
    assert "memotest: cached, replayed" in out, out
    assert count(counter) == 1
    (copy / "data.txt").write_text("two\n")
    code, out = tox(copy, "-e", "py")
    assert code == 0 and count(counter) == 2, out
    assert "content: two" in out
    code, out = tox(root, "-e", "py")
    assert "memotest: cached, replayed" in out and count(counter) == 2, out


def env_project(
    tmp_path: Path, counter: Path, command: str, files: dict[str, str], setting: str
) -> Path:
    """A skip_install project whose ``py`` env bumps a counter and runs ``command``, with
    one more ``[testenv]`` line."""
    return write(
        tmp_path / "proj",
        {
            "tox.ini": f"""
                [tox]
                env_list = py
                [testenv]
                skip_install = true
                {setting}
                commands =
                    {bump(counter)}
                    {command}
                """,
            **files,
        },
    )


PAD = " " * 20  # a continuation line of the setting, as env_project indents it


def pytest_env(tmp_path: Path, counter: Path, commands: str) -> Path:
    """A project whose ``py`` env runs real pytest (the host's, through ``PYTHONPATH``) on
    one test that uses ``tmp_path``."""
    site = os.path.dirname(os.path.dirname(pytest.__file__))
    test = """
        def test_a(tmp_path):
            (tmp_path / "x").write_text("hi")
            assert (tmp_path / "x").read_text() == "hi"
        """
    # Without the host's plugins: a plugin's leftover (pytest-benchmark's ``.benchmarks``)
    # in the folder pytest's import system listed would make the second run run again.
    setting = "\n".join(
        ["set_env =", f"{PAD}PYTHONPATH={site}", f"{PAD}PYTEST_DISABLE_PLUGIN_AUTOLOAD=1"]
    )
    return env_project(tmp_path, counter, commands, {"tests/test_a.py": test}, setting)


def test_pytest_basetemp_in_env_tmp_dir_replays_on_the_second_run(tmp_path):
    """tox empties ``env_tmp_dir`` before the commands; pytest removes its basetemp, makes
    it again and looks for its ``test_acurrent`` link before making it. That folder is the
    run's own (memotest/run/scratch.py): the second run replays."""
    counter = tmp_path / "counter"
    cmd = "python -m pytest -q -p no:cacheprovider --basetemp={env_tmp_dir} tests"
    root = pytest_env(tmp_path, counter, cmd)
    code, out = tox(root, "-e", "py")
    assert code == 0, out
    assert "1 passed" in out and "not cached" not in out, out
    code, out = tox(root, "-e", "py")
    assert code == 0, out
    assert "memotest: cached, replayed" in out, out
    assert count(counter) == 1
    # Whatever is left in the folder is never an input: the runner empties it first.
    (root / ".tox" / "py" / "tmp" / "junk").write_text("left by someone\n")
    (root / "tests" / "test_a.py").write_text("def test_a():\n    assert False\n")
    code, out = tox(root, "-e", "py")
    assert code != 0 and count(counter) == 2, out
    assert "test_a.py: content changed" in out


def test_an_env_whose_test_kills_its_pager_at_once_replays(tmp_path):
    """A program killed before its first call into the C library did not run without the
    shim (``tracer/collect.py``): the env is cached from its first run."""
    counter = tmp_path / "counter"
    sleep = shutil.which("sleep") or "/bin/sleep"
    pager = f"""
        import subprocess
        for _ in range(10):
            p = subprocess.Popen([{sleep!r}, "30"], stdin=subprocess.DEVNULL)
            p.kill()
            assert p.wait() < 0
        print("pager killed")
        """
    root = env_project(
        tmp_path, counter, "python pager.py", {"pager.py": pager}, f"allowlist_externals = {sleep}"
    )
    code, out = tox(root, "-e", "py")
    assert code == 0 and "pager killed" in out, out
    assert "not cached" not in out, out
    code, out = tox(root, "-e", "py")
    assert code == 0 and "memotest: cached, replayed" in out, out
    assert count(counter) == 1


def test_tox_users_declare_services_in_tox_ini(tmp_path):
    """The setting a note advises is one a tox user has a file for: tox.ini's [memotest]."""
    from memotest_tox import tox_settings

    ini = tmp_path / "tox.ini"
    ini.write_text(
        "[tox]\nenv_list = py\n[memotest]\nservices =\n  127.0.0.1:6379\n  unix:/run/x.sock\n"
    )
    assert tox_settings.services(ini) == ("127.0.0.1:6379", "unix:/run/x.sock")
    note = "connected to 127.0.0.1:6379, which no process of the target listens on; declare it "
    note += "in settings.services if its data never changes the result"
    assert "services in the [memotest] section of tox.ini" in str(tox_settings.reword(note))
    ini.write_text("[tox]\nenv_list = py\n[memotest]\nservices = 127.0.0.1:notaport\n")
    proc = memotest("list", "-f", "tox.ini", cwd=tmp_path)
    assert proc.returncode == 2
    assert f"{ini}: [memotest] services:" in proc.stderr.decode()
