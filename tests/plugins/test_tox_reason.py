"""The tox plugin's note gives the reason of the recorded run that decides (issue 28):
after a failing edit and its revert replayed the older passing run, the next real edit is
named, not "last run failed". Real tox 4, real memotest."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from test_tox import pytestmark  # noqa: F401  (the same skips)

PY = sys.executable


TOX_INI = """[tox]
env_list = py
[testenv]
skip_install = true
commands = python -c "import sys; sys.exit(0 if open('code.txt').read().startswith('good') else 1)"
"""


def tox(root: Path) -> tuple[int, str]:
    env = dict(os.environ, PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_NO_INDEX="1", NO_COLOR="1")
    for name in ("PYTHONHASHSEED", "TOX_HASHSEED", "TOXHASHSEED", "TOX_ENV", "TOXENV"):
        env.pop(name, None)
    env["TOX_USER_CONFIG_FILE"] = os.devnull
    proc = subprocess.run(
        [PY, "-m", "tox", "-e", "py"],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    return proc.returncode, proc.stdout + proc.stderr


def test_the_note_gives_the_reason_of_the_run_that_decided(tmp_path):
    root = tmp_path / "proj"
    root.mkdir()
    (root / "tox.ini").write_text(TOX_INI)
    code_txt = root / "code.txt"
    code_txt.write_text("good\n")
    assert tox(root)[0] == 0
    code_txt.write_text("bad\n")
    assert tox(root)[0] != 0
    code_txt.write_text("good\n")
    code, out = tox(root)
    assert code == 0 and "memotest: ran" not in out, out  # the older pass, replayed
    code_txt.write_text("good, edited\n")
    code, out = tox(root)
    assert code == 0, out
    assert f"memotest: ran: {code_txt}: content changed" in out, out
    assert "last run failed" not in out
