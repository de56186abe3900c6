"""Soundness audit, the ``order`` kinds (issue 18): does a build agree, test by test, with
the file run whole by pytest when a test depends on state an earlier test left?

A ``--pytest`` project of its own (``order/`` beside ``redteam/``, built by
``benchmarks/soundness.py`` with the same interpreter and memotest) holds one test file
whose second test passes only after the first ran (``test_a`` fills a module-level dict
that ``test_b`` reads), and one whose tests share a session fixture that the first test
changes. The change is a bytecode-only edit (``_soundness_probe = 1;`` before a
statement, no line moved) of a function that only the *later* test executes, so that
test-level selection would run the later test alone. After the build, the file is run
whole by one-process pytest (``-p no:cacheprovider``, JUnit XML) and every test's outcome
is compared with the build's (``--json-report``'s ``tests``):

- ``order``: the default (whole files): the target re-runs whole and must agree;
- ``order-select``: ``--select tests`` (opt-in, ``memotest/check/select.py``): only the later
  test runs, without the state the earlier one leaves, and it disagrees. It is the
  measurement behind keeping test-level selection opt-in (``docs/limits.md``, "running
  part of a test file"), shown in the audit's output as *known*, not counted as a failure.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import xml.etree.ElementTree as ET
from collections.abc import Callable

from soundness_redteam import Proj, RedTeam, files, write

KINDS = ("order", "order-select")
#: Kinds whose disagreement is the known, documented cost of an opt-in mode.
KNOWN = {"order-select"}
PROBE = "_soundness_probe = 1; "

STATE = """\
STATE = {}


def fill():
    STATE["ready"] = True


def ready():
    return STATE.get("ready", False)


def count(resource):
    resource["n"] += 1
    return resource["n"]


def peek(resource):
    return resource["n"]
"""
PAIR = """\
from order_pkg import state


def test_a():
    state.fill()


def test_b():
    assert state.ready()
"""
CONFTEST = """\
import pytest


@pytest.fixture(scope="session")
def resource():
    return {"n": 0}
"""
SHARED = """\
from order_pkg import state


def test_first(resource):
    assert state.count(resource) == 1


def test_second(resource):
    assert state.peek(resource) == 1
"""
#: (test file, the function only its later test runs, its text: the probe goes before its
#: first statement)
CASES = (
    ("tests/test_pair.py", "ready", 'def ready():\n    return STATE.get("ready", False)\n'),
    ("tests/test_shared.py", "peek", 'def peek(resource):\n    return resource["n"]\n'),
)


def build(rt: RedTeam, proj: Proj, extra: list[str]) -> dict[str, dict[str, str]]:
    """Builds ``proj``'s ``--pytest`` targets: {target: {test name: outcome}} and each
    target's status under the key ``""``."""
    report = proj.root.parent / "order-report.json"
    report.unlink(missing_ok=True)
    cmd = [rt.memotest, "build", f"-j{rt.jobs}", "--json-report", str(report), *extra]
    cmd += ["--pytest", proj.pytest or "tests"]
    proc = subprocess.run(
        cmd, cwd=proj.root, env=rt.env, capture_output=True, text=True, timeout=600
    )
    rt.builds += 1
    if not report.exists():
        rt.log(f"  memotest refused to build order/: {(proc.stdout + proc.stderr)[-300:]}")
        return {}
    out: dict[str, dict[str, str]] = {}
    for t in json.loads(report.read_text())["targets"]:
        tests = {c["id"].rsplit("::", 1)[-1]: c["status"] for c in t.get("tests") or ()}
        out[t["name"]] = {"": t["status"], **tests}
    return out


def whole(rt: RedTeam, proj: Proj, test_file: str) -> dict[str, str]:
    """``test_file`` run whole by one-process pytest: {test name: outcome}."""
    xml = proj.root.parent / "order-junit.xml"
    subprocess.run(
        [rt.py, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={xml}", test_file],
        cwd=proj.root,
        env=rt.env,
        capture_output=True,
        timeout=600,
    )
    out = {}
    for case in ET.parse(xml).getroot().iter("testcase"):
        verdict = "passed"
        for child in case:
            if child.tag in ("failure", "error", "skipped"):
                verdict = {"failure": "failed", "error": "error"}.get(child.tag, "skipped")
        out[case.get("name", "?")] = verdict
    return out


def run(rt: RedTeam, want: Callable[[str], bool]) -> list[dict]:
    """Sets up ``order/`` and runs the wanted kinds; returns their cases."""
    results: list[dict] = []
    proj = Proj(rt.base.parent / "order", pytest="tests")
    for kind in KINDS:
        if not want(kind):
            continue
        extra = ["--select", "tests"] if kind == "order-select" else []
        # A fresh store per kind: a record made with a change in place is remembered (many
        # states per target) and would replay the same change in the next kind.
        shutil.rmtree(proj.root, ignore_errors=True)
        files(
            proj.root,
            {
                "pyproject.toml": '[tool.pytest.ini_options]\npythonpath = ["."]\n',
                "order_pkg/__init__.py": "",
                "order_pkg/state.py": STATE,
                "tests/conftest.py": CONFTEST,
                "tests/test_pair.py": PAIR,
                "tests/test_shared.py": SHARED,
            },
        )
        for _ in range(2):
            build(rt, proj, extra)
        for test_file, func, line in CASES:
            target = f"pytest:{test_file}"
            path = proj.root / "order_pkg" / "state.py"
            text = path.read_text()
            head, body = line.split("\n", 1)
            probed = f"{head}\n{body[:4]}{PROBE}{body[4:]}"
            change, undo = write(path, text.replace(line, probed, 1))
            change()
            said = subprocess.run(
                [rt.memotest, "explain", target, *extra, "--pytest", proj.pytest or "tests"],
                cwd=proj.root,
                env=rt.env,
                capture_output=True,
                text=True,
                timeout=600,
            ).stdout.strip()
            got = build(rt, proj, extra).get(target, {"": "missing"})
            expected = whole(rt, proj, test_file)
            undo()
            build(rt, proj, extra)
            tests = {k: v for k, v in got.items() if k}
            agree = tests == expected
            results.append(
                {
                    "kind": kind,
                    "target": f"order:{target}",
                    "change": f"state.py: {func}() edited (bytecode only; only the later test "
                    "runs it)",
                    "status": got[""],
                    "reason": "" if agree else f"memotest {tests} != pytest whole {expected}",
                    "ok": agree,
                    "known": kind in KNOWN and not agree,
                }
            )
            rt.log(f"  {kind} {target}: memotest {tests}, pytest whole {expected}; {said}")
    return results
