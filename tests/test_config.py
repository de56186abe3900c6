"""Bad targets files: one message with the file, the line and the fix; exit 2; nothing runs."""

from __future__ import annotations

import textwrap

import pytest
from conftest import memotest

CASES = {
    "unknown-key": (
        """
        [targets.a]
        command = "true"
        comand = "x"
    """,
        ":4: target 'a': unknown key 'comand' (did you mean 'command'?)",
    ),
    "select-value": (
        """
        [settings]
        select = "test"

        [targets.a]
        command = "true"
    """,
        'select must be "tests" or "files"',
    ),
    "wrong-type": (
        """
        [targets.a]
        command = "true"
        timeout = "soon"
    """,
        ":4: target 'a': timeout must be seconds > 0",
    ),
    "needs-cycle": (
        """
        [targets.a]
        command = "true"
        needs = ["b"]

        [targets.b]
        command = "true"
        needs = ["a"]
    """,
        "needs form a cycle: a -> b -> a",
    ),
    "unknown-need": (
        """
        [targets.a]
        command = "true"
        needs = ["ghost"]
    """,
        ":4: target 'a' needs 'ghost', which is not defined",
    ),
    "foreach-without-path": (
        """
        [targets.unit]
        foreach = "*.toml"
        command = "pytest"
    """,
        "must contain {path}",
    ),
    "duplicate-table": (
        """
        [targets.a]
        command = "true"

        [targets.a]
        command = "false"
    """,
        ":5: TOML syntax error",
    ),
    "syntax": (
        """
        [targets.a]
        command = "true
    """,
        ":3: TOML syntax error",
    ),
    "unknown-setting": (
        """
        [settings]
        jobz = 2
        [targets.a]
        command = "true"
    """,
        ":3: unknown setting 'jobz'",
    ),
    "no-command": (
        """
        [targets.a]
        cwd = "."
    """,
        ":2: target 'a' has no command",
    ),
    "bad-jobs": (
        """
        [settings]
        jobs = 0
        [targets.a]
        command = "true"
    """,
        "jobs must be a whole number of at least 1",
    ),
}


@pytest.mark.parametrize("name", list(CASES))
def test_bad_toml_is_exit_2_with_file_and_line(tmp_path, name):
    text, message = CASES[name]
    text = textwrap.dedent(text)
    if 'command = "true"' in text:
        text = text.replace('command = "true"', 'command = "touch ran"', 1)
    (tmp_path / "memotest.toml").write_text(text)
    proc = memotest("build", cwd=tmp_path)
    err = proc.stderr.decode()
    assert proc.returncode == 2, err
    assert message in err
    assert str(tmp_path / "memotest.toml") in err
    assert "Traceback" not in err
    assert len(err.strip().splitlines()) == 1
    assert not (tmp_path / "ran").exists()


YAML_CASES = {
    "duplicate-key": (
        """
        targets:
          a:
            command: "true"
          a:
            command: "false"
    """,
        ":5: duplicate key 'a'",
    ),
    "syntax": (
        """
        targets:
          a:
            command: [unclosed
    """,
        "YAML syntax error",
    ),
    "unknown-key": (
        """
        targets:
          a:
            command: "true"
            tgas: [x]
    """,
        ":5: target 'a': unknown key 'tgas' (did you mean 'tags'?)",
    ),
}


@pytest.mark.parametrize("name", list(YAML_CASES))
def test_bad_yaml_is_exit_2_with_file_and_line(tmp_path, name):
    text, message = YAML_CASES[name]
    (tmp_path / "memotest.yaml").write_text(textwrap.dedent(text))
    proc = memotest("build", cwd=tmp_path)
    err = proc.stderr.decode()
    assert proc.returncode == 2, err
    assert message in err
    assert "Traceback" not in err


def test_yaml_targets_file_runs(tmp_path):
    (tmp_path / "memotest.yml").write_text('targets:\n  hello:\n    command: ["true"]\n')
    proc = memotest("build", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr.decode()
    assert b"PASSED hello" in proc.stdout


def test_no_targets_file_says_how_to_fix(tmp_path):
    proc = memotest("build", cwd=tmp_path)
    assert proc.returncode == 2
    assert "no memotest.toml found" in proc.stderr.decode()


def test_targets_file_found_in_a_parent(tmp_path):
    (tmp_path / "memotest.toml").write_text('[targets.a]\ncommand = "true"\n')
    sub = tmp_path / "deep" / "er"
    sub.mkdir(parents=True)
    proc = memotest("build", cwd=sub)
    assert proc.returncode == 0, proc.stderr.decode()


@pytest.mark.parametrize(
    "args, message",
    [
        (["build", "-j", "0"], "build: -j must be at least 1"),
        (["frob"], "invalid choice: 'frob'"),
        (["explain"], "explain needs a TARGET: memotest explain TARGET"),
    ],
)
def test_bad_command_lines_are_one_line_and_exit_2(tmp_path, args, message):
    (tmp_path / "memotest.toml").write_text('[targets.a]\ncommand = "touch ran"\n')
    proc = memotest(*args, cwd=tmp_path)
    err = proc.stderr.decode()
    assert proc.returncode == 2
    assert err.startswith("memotest: ") and message in err
    assert len(err.strip().splitlines()) == 1
    assert not (tmp_path / "ran").exists()
