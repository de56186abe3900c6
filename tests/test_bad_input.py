"""Bad input gets a clear error: exit 2, the file and line where there is one, no
traceback, nothing run (issue 16). Each case is a real ``memotest build`` on a real
targets file; a second target would leave a file behind if anything had run."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from tests.conftest import memotest, write_tree

RAN = '[targets.ok]\ncommand = "touch ran"\n'

#: (targets file text after the ``ok`` target, the line the error names, words of it)
CASES = {
    "nul-in-command": ('[targets.a]\ncommand = "echo a\\u0000b"\n', 4, "NUL"),
    "nul-in-argv": ('[targets.a]\ncommand = ["echo", "a\\u0000b"]\n', 4, "NUL"),
    "nul-in-env-value": ('[targets.a]\ncommand = "echo"\nenv = { A = "x\\u0000" }\n', 5, "NUL"),
    "nul-in-env-name": ('[targets.a]\ncommand = "echo"\nenv = { "A\\u0000" = "1" }\n', 5, "env"),
    "equals-in-env-name": ('[targets.a]\ncommand = "echo"\nenv = { "A=B" = "1" }\n', 5, "'='"),
    "empty-env-name": ('[targets.a]\ncommand = "echo"\nenv = { "" = "1" }\n', 5, "env"),
    "timeout-nan": ('[targets.a]\ncommand = "echo"\ntimeout = nan\n', 5, "finite"),
    "timeout-inf": ('[targets.a]\ncommand = "echo"\ntimeout = inf\n', 5, "finite"),
    "timeout-zero": ('[targets.a]\ncommand = "echo"\ntimeout = 0\n', 5, "timeout"),
    "timeout-negative": ('[targets.a]\ncommand = "echo"\ntimeout = -1\n', 5, "timeout"),
    "output-absolute": (
        '[targets.a]\ncommand = "echo"\noutputs = ["/tmp/memotest-x"]\n',
        5,
        "absolute",
    ),
    "output-dotdot": ('[targets.a]\ncommand = "echo"\noutputs = ["../x"]\n', 5, ".."),
    "output-dotdot-inside": ('[targets.a]\ncommand = "echo"\noutputs = ["a/../../x"]\n', 5, ".."),
    "input-absolute": ('[targets.a]\ncommand = "echo"\ninputs = ["/etc/hosts"]\n', 5, "outside"),
    "input-dotdot": ('[targets.a]\ncommand = "echo"\ninputs = ["../x"]\n', 5, "outside"),
    "empty-argv": ('[targets.a]\ncommand = [""]\n', 4, "empty"),
    "needs-itself": ('[targets.a]\ncommand = "echo"\nneeds = ["a"]\n', 5, "itself"),
    "cwd-is-a-file": ('[targets.a]\ncommand = "echo"\ncwd = "memotest.toml"\n', 5, "not a folder"),
    "name-with-newline": ('[targets."a\\n"]\ncommand = "echo"\n', None, "not valid"),
    "foreach-matches-nothing": (
        '[targets.a]\nforeach = "nothing/*.py"\ncommand = "echo {path}"\n',
        4,
        "matches no file",
    ),
}


def check_refused(root: Path, proc, line: int | None, words: str) -> str:
    err = proc.stderr.decode(errors="replace")
    assert proc.returncode == 2, err + proc.stdout.decode(errors="replace")
    assert "Traceback" not in err
    assert words in err
    if line is not None:
        assert f"memotest.toml:{line}:" in err
    assert not (root / "ran").exists(), "a target ran"
    return err


@pytest.mark.parametrize("case", sorted(CASES))
def test_targets_file_mistake_is_exit_2_with_its_line(tmp_path: Path, case: str) -> None:
    text, line, words = CASES[case]
    write_tree(tmp_path, {"memotest.toml": RAN + text})
    check_refused(tmp_path, memotest("build", cwd=tmp_path), line, words)


def test_targets_file_not_utf8(tmp_path: Path) -> None:
    (tmp_path / "memotest.toml").write_bytes(RAN.encode() + b'[targets.a]\ncommand = "\xff"\n')
    check_refused(tmp_path, memotest("build", cwd=tmp_path), None, "cannot read")


def test_yaml_not_a_mapping(tmp_path: Path) -> None:
    write_tree(tmp_path, {"memotest.yaml": "- a\n- b\n"})
    check_refused(tmp_path, memotest("build", cwd=tmp_path), None, "mapping")


def test_foreach_file_name_not_utf8(tmp_path: Path) -> None:
    write_tree(
        tmp_path, {"memotest.toml": '[targets.t]\nforeach = "t/*.txt"\ncommand = "cat {path}"\n'}
    )
    (tmp_path / "t").mkdir()
    (tmp_path / os.fsdecode(b"t/x_\xff.txt")).write_text("hi")
    check_refused(tmp_path, memotest("build", cwd=tmp_path), 1, "not UTF-8")


def test_foreach_glob_characters_in_a_file_name(tmp_path: Path) -> None:
    """A file whose name holds a glob's characters is its own target, and only it."""
    write_tree(
        tmp_path,
        {
            "memotest.toml": '[targets.t]\nforeach = "t/*.txt"\ncommand = ["cat", "{path}"]\n',
            "t/x[1].txt": "bracket\n",
            "t/x1.txt": "plain\n",
        },
    )
    proc = memotest("build", "-v", "t:t/x[1].txt", cwd=tmp_path)
    out = proc.stdout.decode()
    assert proc.returncode == 0, out + proc.stderr.decode()
    assert "bracket" in memotest("show", "--log", "t:t/x[1].txt", cwd=tmp_path).stdout.decode()
    assert "t:t/x1.txt" not in out


@pytest.mark.parametrize("where", ["folder", "is-a-folder", "unwritable"])
@pytest.mark.parametrize("option", ["--json-report", "--junit-xml"])
def test_report_path_checked_before_running(tmp_path: Path, where: str, option: str) -> None:
    write_tree(tmp_path, {"memotest.toml": RAN})
    path = {
        "folder": str(tmp_path / "no" / "such" / "r.json"),
        "is-a-folder": str(tmp_path),
        "unwritable": "/proc/memotest-report.json",  # even root cannot create a file here
    }[where]
    proc = memotest("build", option, path, cwd=tmp_path)
    check_refused(tmp_path, proc, None, "cannot write")


def test_pytest_file_with_brackets_runs_alone(tmp_path: Path) -> None:
    """``test_x[1].py``: pytest reads ``[`` in an argument as a parametrization; the
    target runs that file, and only it."""
    write_tree(
        tmp_path,
        {
            "tests/test_x[1].py": "def test_bracket():\n    assert True\n",
            "tests/test_x1.py": "def test_plain():\n    assert False\n",
        },
    )
    proc = memotest("build", "pytest:tests/test_x[1].py", "--pytest", cwd=tmp_path, timeout=300)
    out = proc.stdout.decode() + proc.stderr.decode()
    assert proc.returncode == 0, out
    assert "PASSED pytest:tests/test_x[1].py" in out
    assert "test_x1.py" not in out


def test_outputs_restored_only_inside_the_target_folder(tmp_path: Path) -> None:
    """A record naming an output outside the target's folder (made elsewhere) restores
    nothing: the restore-time check, below the loader's."""
    from memotest.store.errors import StoreError
    from memotest.store.outputs import restore_outputs

    class Blobs:
        def read(self, digest: str) -> bytes:
            return b"x"

    for rel in ("../escaped", "/tmp/memotest-escaped", "a/../../escaped"):
        with pytest.raises(StoreError):
            restore_outputs(Blobs(), {rel: "0" * 32}, str(tmp_path / "cwd"))  # type: ignore[arg-type]
    assert not (tmp_path / "escaped").exists()
    assert sys.platform != "linux" or not Path("/tmp/memotest-escaped").exists()
