"""``memotest build --from tox`` and ``memotest list --from tox`` as a user meets them:
an env tox skips is skipped, and every config format tox reads is read. Real tox 4."""

from __future__ import annotations

import textwrap
from pathlib import Path

from conftest import build_statuses, memotest
from test_tox import environ, pytestmark  # noqa: F401  (the same skips as test_tox)

SKIPPING = """
    [tox]
    env_list = ok, miss
    skip_missing_interpreters = true

    [testenv]
    skip_install = true
    commands = python -c "open('../counter', 'a').write('x\\n')"

    [testenv:miss]
    base_python = python3.99
"""


def test_an_env_tox_skips_is_skipped_never_a_cached_pass(tmp_path):
    root = tmp_path / "proj"
    root.mkdir()
    (root / "tox.ini").write_text(textwrap.dedent(SKIPPING))
    report = tmp_path / "report.json"
    for _ in range(2):  # the second build does not replay the skip as a pass
        code, out, st = build_statuses(root, "--from", "tox", "miss", env=environ(), report=report)
        assert code == 0, out  # a skip is not a failure
        assert st == {"miss": "skipped"}, out
        assert "could not find python interpreter" in out
    # An env that runs beside a skipped one still passes.
    code, out, st = build_statuses(root, "--from", "tox", env=environ(), report=report)
    assert code == 0, out
    assert st == {"ok": "passed", "miss": "skipped"}, out


def listed(root: Path) -> dict[str, str]:
    proc = memotest("list", "--from", "tox", cwd=root, env=environ())
    assert proc.returncode == 0, proc.stdout.decode() + proc.stderr.decode()
    return {ln.split()[0]: ln for ln in proc.stdout.decode().splitlines() if ln.strip()}


def test_list_reads_tox_native_toml_in_pyproject_and_tox_toml(tmp_path):
    pyproject = tmp_path / "a"
    pyproject.mkdir()
    (pyproject / "pyproject.toml").write_text(
        textwrap.dedent(
            """
            [project]
            name = "a"
            version = "0"

            [tool.tox]
            env_list = ["lint", "py"]

            [tool.tox.env_run_base]
            skip_install = true
            commands = [["python", "-c", "print(1)"]]

            [tool.tox.env.docs]
            commands = [["python", "-c", "print(2)"]]
            """
        )
    )
    assert set(listed(pyproject)) == {"lint", "py"}
    sub = pyproject / "src"  # tox looks in the parents too
    sub.mkdir()
    assert set(listed(sub)) == {"lint", "py"}

    native = tmp_path / "b"
    native.mkdir()
    (native / "tox.toml").write_text(
        'env_list = ["t1", "t2"]\n[env_run_base]\nskip_install = true\n'
    )
    assert set(listed(native)) == {"t1", "t2"}
