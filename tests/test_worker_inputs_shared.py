"""What a warm worker observed at start-up is fingerprinted once for all its runs
(``memotest/recording/shared.py``): a run's record takes each such path as the check
before its fork found it, not as it is after the run.

The attack: a path only the worker observed changes while a run forked from it runs,
changed by a process outside the build (a thread of the test, which no tracer sees).
The next build must run that target again: its record may not hold the changed state
as what the run had (a rule that took the state after the run without asking whether
it changed meanwhile would replay). Or the run reads the changed file itself, and it is
put back before the next build (a rule that shared a path the run itself observed
would keep the worker's fingerprint, which holds again, and replay). Two runs of one
worker in each build, so that the second one's record could be made of what the first
one's found. Real workers, real forks, the real shim.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest
from conftest import build_statuses, outside, write_tree

from memotest.world.fingerprint import RACY_WINDOW_NS

SITE = "import builtins, os\nbuiltins.SITE_VALUE = {value}\n"
# An absence the worker looked at (a stat that failed), that a run cannot see again.
SITE_FLAG = (
    "import builtins, os\n"
    "flag = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'flag')\n"
    "builtins.SITE_VALUE = 0 if os.path.exists(flag) else 1\n"
)
PLAIN = "def test_site():\n    assert SITE_VALUE == 1\n"
# Says it started, waits for the test to let it go on, and may change the site itself.
WAITING = """
import pathlib

def test_site():
    pathlib.Path({marker!r}).write_text("")
    with open({go!r}) as f:
        f.read()
    {own}
    assert SITE_VALUE == 1
"""


CASES = {
    "a file rewritten by another process": (SITE.format(value=1), "sitecustomize.py", ""),
    "an absence made a file by another process": (SITE_FLAG, "flag", ""),
    # The run reads the file itself once it changed, and it is put back before the next
    # build: the record may not hold the worker's fingerprint of it, which holds again.
    "a file rewritten, read by the run, put back": (
        SITE.format(value=1),
        "sitecustomize.py",
        "assert 'VALUE = 0' in pathlib.Path({site!r}).read_text()\n    SITE_VALUE = 1",
    ),
}


def built_while(proj: Path, env: dict, marker: Path, go: Path, act) -> tuple[str, dict]:
    """A ``-j1 --pytest`` build of ``proj`` while ``outside`` (conftest) does ``act`` once
    the run says it started, then lets it go on: the build's output and statuses."""
    done = threading.Event()
    helper = threading.Thread(target=outside, args=(marker, go, act, done))
    helper.start()
    try:
        _, out, st = build_statuses(proj, "-v", "-j", "1", "--pytest", env=env)
    finally:
        done.set()
        helper.join(timeout=30)
    return out, st


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_path_only_the_worker_observed_changed_during_a_run_reruns_it(
    tmp_path: Path, case: str
) -> None:
    sitecustomize, changed, own = CASES[case]
    site = write_tree(tmp_path / "site", {"sitecustomize.py": sitecustomize})
    # Older than the racy window (its ctime too, which no utime sets back): only then do
    # the worker's runs share its fingerprint (recording/shared.py), which this attacks.
    time.sleep(RACY_WINDOW_NS / 1e9 + 0.2)
    sync = tmp_path / "sync"
    sync.mkdir()
    marker, go = sync / "started", sync / "go"
    os.mkfifo(go)
    own = own.format(site=str(site / "sitecustomize.py"))
    files = {
        "pytest.ini": "[pytest]\n",
        "tests/test_a.py": PLAIN,
        "tests/test_b.py": WAITING.format(marker=str(marker), go=str(go), own=own or "pass"),
    }
    proj = write_tree(tmp_path / "proj", files)
    time.sleep(0.05)  # all older than the worker's start
    env = dict(os.environ, PYTHONPATH=str(site))

    def act() -> None:
        if changed == "flag":
            (site / "flag").write_text("")
        elif changed is not None:
            (site / changed).write_text(SITE.format(value=0))

    out, st = built_while(proj, env, marker, go, act)
    assert st.get("pytest:tests/test_b.py") == "passed", out  # the worker's value: 1
    if own:
        (site / "sitecustomize.py").write_text(sitecustomize)  # as it was
    # The run again (it must be one) is let go on at once.
    out2, st = built_while(proj, env, marker, go, None)
    # It must run again, and now sees the site as it is (no longer what the run had).
    assert st.get("pytest:tests/test_b.py") == "failed", f"{out}\n---\n{out2}"
    if not own:
        assert st.get("pytest:tests/test_a.py") == "failed", f"{out}\n---\n{out2}"
