"""The BUILD-file adapter: a small Bazel-style workspace, real processes, the real shim."""

from __future__ import annotations

import json
import os
import shutil
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import REPO, memotest
from memotest_rules.workspace import LAUNCHER, Workspace

from memotest.errors import ConfigError

COUNT_SH = """
echo "$1" >> "$COUNTER"
"""

WORKSPACE_FILES = {
    "MODULE.bazel": 'module(name = "ws")\n',
    "BUILD": """
        test_suite(
            name = "quick",
            tests = ["//lib:math_test", "//tools:shell_test"],
        )
    """,
    "lib/BUILD.bazel": """
        load("@rules_python//python:defs.bzl", "py_library", "py_test")

        py_library(
            name = "lib",
            srcs = glob(["*.py"], exclude = ["*_test.py", "big_*.py"]),
        )

        py_test(
            name = "math_test",
            size = "small",
            srcs = ["math_test.py"],
            deps = [":lib"],
            data = ["cases.txt"],
            env = {"COUNTER": "COUNTER_DIR/math_test"},
        )

        py_test(
            name = "big_test",
            srcs = glob(["big_*.py"]) + ["big_test.py"],
            size = "large",
            timeout = "short",
            tags = ["exclusive", "flaky"],
            deps = [":lib"],
        )

        py_test(
            name = "by_hand_test",
            srcs = ["math_test.py"],
            main = "math_test.py",
            tags = ["manual"],
            env = {"COUNTER": "COUNTER_DIR/by_hand_test"},
        )
    """,
    "lib/mathlib.py": "def double(x):\n    return 2 * x\n",
    "lib/big_test.py": "from lib import mathlib\nassert mathlib.double(2) == 4\n",
    "lib/big_helper.py": "",
    "lib/cases.txt": "1 2\n",
    "lib/sub/BUILD": """
        sh_test(
            name = "sub_test",
            srcs = glob(["*_test.sh"]),
            flaky = True,
            tags = ["external"],
        )
    """,
    "lib/sub/sub_test.sh": "echo sub\n",
    "tools/BUILD": """
        sh_test(
            name = "shell_test",
            srcs = glob(["*_test.sh"]),
            args = ["shell_test"],
            data = ["unread.txt"],
            env = {"COUNTER": "COUNTER_DIR/shell_test"},
        )
    """,
    "tools/shell_test.sh": COUNT_SH,
    "tools/unread.txt": "nobody reads me\n",
}


@pytest.fixture
def ws(tmp_path) -> tuple[Path, Path]:
    """The workspace and its counters folder (outside the workspace; one file per test, so
    that tests running side by side do not write the same file)."""
    counter = tmp_path / "counters"
    counter.mkdir()
    root = tmp_path / "ws"
    for rel, text in WORKSPACE_FILES.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(textwrap.dedent(text).lstrip("\n").replace("COUNTER_DIR", str(counter)))
    # math_test counts its runs and reads cases.txt through the library.
    (root / "lib" / "math_test.py").write_text(
        "import os\nfrom lib import mathlib\n"
        "with open(os.environ['COUNTER'], 'a') as f:\n"
        "    f.write('math_test\\n')\n"
        "a, b = open('lib/cases.txt').read().split()\n"
        "assert mathlib.double(int(a)) == int(b)\n"
        "print('math ok')\n"
    )
    return root, counter


def build(root: Path, *args: str) -> tuple[int, str, dict[str, str]]:
    report = root.parent / "report.json"
    if report.exists():
        report.unlink()
    proc = memotest("build", "-j", "2", "--json-report", str(report), *args, cwd=root)
    out = proc.stdout.decode() + proc.stderr.decode()
    data = json.loads(report.read_text()) if report.exists() else {"targets": []}
    return proc.returncode, out, {t["name"]: t["status"] for t in data["targets"]}


def runs(counters: Path, name: str) -> int:
    path = counters / name
    return len(path.read_text().splitlines()) if path.exists() else 0


def test_build_runs_then_caches_and_leaves_manual_out(ws):
    root, counter = ws
    code, out, st = build(root)
    assert code == 0, out
    assert st == {
        "//lib:math_test": "passed",
        "//lib:big_test": "passed",
        "//lib/sub:sub_test": "passed",
        "//tools:shell_test": "passed",
    }
    code, out, st = build(root)
    assert code == 0, out
    assert st["//lib:math_test"] == "cached" and st["//tools:shell_test"] == "cached"
    assert st["//lib/sub:sub_test"] == "passed"  # tagged external: never cached
    assert runs(counter, "math_test") == 1


def test_labels_select_like_bazel(ws):
    root, _ = ws
    _, out, st = build(root, "//lib/...")
    assert set(st) == {"//lib:math_test", "//lib:big_test", "//lib/sub:sub_test"}, out
    _, _, st = build(root, "//lib:all")
    assert set(st) == {"//lib:math_test", "//lib:big_test"}
    _, _, st = build(root, "//:quick")
    assert set(st) == {"//lib:math_test", "//tools:shell_test"}
    # A manual test runs only when named exactly.
    code, out, st = build(root, "//lib:by_hand_test")
    assert code == 0 and st == {"//lib:by_hand_test": "passed"}, out
    code, out, _ = build(root, "//lib:nope")
    assert code == 2 and "unknown target '//lib:nope'" in out


def test_editing_data_reruns_only_its_test(ws):
    root, counter = ws
    code, out, _ = build(root, "//:quick")
    assert code == 0, out
    # unread.txt is declared data that shell_test never opens: declared inputs count too.
    (root / "tools" / "unread.txt").write_text("changed\n")
    _, _, st = build(root, "//:quick")
    assert st == {"//lib:math_test": "cached", "//tools:shell_test": "passed"}
    (root / "lib" / "cases.txt").write_text("3 6\n")
    _, _, st = build(root, "//:quick")
    assert st == {"//lib:math_test": "passed", "//tools:shell_test": "cached"}
    assert runs(counter, "math_test") == 2 and runs(counter, "shell_test") == 2


def test_rule_attributes_map_to_targets(ws):
    root, _ = ws
    w = Workspace(root)
    math = w.tests["//lib:math_test"].target
    assert math.command == ("python3", LAUNCHER, "lib/math_test.py")
    assert dict(math.env)["PYTHONPATH"] == str(root)
    assert math.cwd == str(root) and math.timeout == 60.0
    assert math.inputs == ("lib/cases.txt", "lib/math_test.py", "lib/mathlib.py")
    big = w.tests["//lib:big_test"].target
    assert big.timeout == 60.0  # an explicit timeout wins over size
    assert big.tags == {"exclusive", "flaky"}
    assert big.command == ("python3", LAUNCHER, "lib/big_test.py")
    sub = w.tests["//lib/sub:sub_test"].target
    assert sub.tags == {"flaky", "no-cache"} and sub.timeout == 300.0
    assert sub.command == ("sh", "lib/sub/sub_test.sh")
    assert w.tests["//tools:shell_test"].target.command == (
        "sh",
        "tools/shell_test.sh",
        "shell_test",
    )
    # glob() stays in its package: lib's glob does not see lib/sub's files.
    assert all(not p.startswith("lib/sub/") for p in big.inputs)
    assert w.expand("//lib/...") == ["//lib:math_test", "//lib:big_test", "//lib/sub:sub_test"]
    assert w.expand("//lib:by_hand_test") == ["//lib:by_hand_test"]  # manual: only by name
    assert w.expand("something-else") is None  # left to the core


@pytest.mark.parametrize(
    ("build_text", "line", "message"),
    [
        ('SRCS = ["a.py"]\n', 1, "an assignment (SRCS = ['a.py']) at"),
        ('py_test(\n    name = "a",\n    srcs = SRCS,\n)\n', 3, "a variable (SRCS)"),
        ("def f():\n    pass\n", 1, "a function definition (def) (def f():) at"),
        ('if True:\n    py_test(name = "a")\n', 1, "an if statement"),
        ('py_test(name = "a", srcs = select({}))\n', 1, "calling select() is not supported"),
        ('py_test(name = "a",\n  srcs = ["a.py"], shards = 2)\n', 2, "attribute 'shards'"),
        ('py_test(name = "a", srcs = ["a.py"], size = "huge")\n', 1, "size must be one of"),
        ('py_test(name = "a", srcs = ["missing.py"])\n', 1, "no file pkg/missing.py"),
    ],
)
def test_what_memotest_cannot_read_is_set_aside_with_file_and_line(
    tmp_path, build_text, line, message
):
    """The BUILD file still loads; the rest of the workspace's tests with it."""
    (tmp_path / "WORKSPACE").write_text("")
    (tmp_path / "a.py").write_text("")
    (tmp_path / "t.py").write_text("")
    (tmp_path / "BUILD").write_text('py_test(name = "t", srcs = ["t.py"])\n')
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "a.py").write_text("")
    (tmp_path / "pkg" / "BUILD").write_text(build_text)
    w = Workspace(tmp_path)
    assert list(w.tests) == ["//:t"]
    note = w.unread_note()
    assert note is not None and message in note
    assert f"{tmp_path / 'pkg' / 'BUILD'}:{line}" in note


def test_a_build_syntax_error_is_an_error_with_file_and_line(tmp_path):
    (tmp_path / "WORKSPACE").write_text("")
    (tmp_path / "BUILD").write_text('py_test(name = "a" srcs = [])\n')
    with pytest.raises(ConfigError) as exc:
        Workspace(tmp_path)
    assert str(exc.value).startswith(f"{tmp_path / 'BUILD'}:1: BUILD syntax error")


MIXED = """
load("@rules_python//python:defs.bzl", "py_binary", "py_library", "py_test")
load("@rules_cc//cc:defs.bzl", "cc_binary", "cc_library")

py_binary(name = "app", srcs = ["app.py"], deps = [":lib"], main = select({"//c": "a.py"}))
py_library(name = "lib", srcs = ["lib.py"])
filegroup(name = "testdata", srcs = ["data.txt"])
genrule(name = "gen", srcs = ["data.txt"], outs = ["gen.txt"], cmd = "cp $< $@")
cc_library(name = "clib", srcs = ["c.c"], hdrs = ["c.h"])
cc_binary(name = "cbin", srcs = ["main.c"], deps = [":clib"])
my_company_macro(name = "weird", anything = some_variable)
py_test(name = "lib_test", srcs = ["lib_test.py"], deps = [":lib"], data = [":testdata"])
py_test(name = "gen_test", srcs = ["gen_test.py"], data = [":gen"])
"""


def test_a_workspace_of_binaries_libraries_and_unknown_rules_builds_its_tests(tmp_path):
    """py_binary, genrule, cc_* and an unknown macro beside py_tests: the tests that need
    none of them build and pass; the one that needs a genrule is set aside; one note."""
    counter = tmp_path / "counter"
    counter.mkdir()
    root = tmp_path / "ws"
    root.mkdir()
    (root / "MODULE.bazel").write_text("")
    (root / "BUILD.bazel").write_text(MIXED)
    (root / "lib.py").write_text("def double(x):\n    return 2 * x\n")
    (root / "data.txt").write_text("data\n")
    (root / "lib_test.py").write_text(
        f"import lib, pathlib\npathlib.Path({str(counter)!r}, 'lib_test').touch()\n"
        "assert lib.double(2) == 4\nassert open('data.txt').read() == 'data\\n'\n"
    )
    (root / "gen_test.py").write_text("")
    listed = memotest("list", cwd=root)
    err = listed.stderr.decode()
    assert listed.returncode == 0, err
    assert "//:lib_test" in listed.stdout.decode()
    assert "//:gen_test" not in listed.stdout.decode()
    assert err.count("memotest: BUILD files: not run:") == 1
    for kind in ("1 py_binary()", "1 genrule()", "1 cc_library()", "1 cc_binary()"):
        assert kind in err
    assert "1 my_company_macro()" in err
    assert "//:gen_test:" in err and "needs //:gen, a genrule()" in err
    built = memotest("build", cwd=root)
    assert built.returncode == 0, built.stderr.decode()
    assert (counter / "lib_test").exists()


def test_example_workspace(tmp_path):
    root = tmp_path / "rules"
    shutil.copytree(
        REPO / "examples" / "rules",
        root,
        ignore=shutil.ignore_patterns(".memotest", "__pycache__"),
    )
    code, out, st = build(root)
    assert code == 0, out
    assert st == {
        "//calc:arith_test": "passed",
        "//calc:text_test": "passed",
        "//scripts:greet_test": "passed",
    }
    code, out, st = build(root, "//:fast")
    assert code == 0 and st == {"//calc:arith_test": "cached", "//scripts:greet_test": "cached"}


def test_a_new_file_at_the_root_does_not_rerun_a_py_test_but_a_shadowing_module_does(tmp_path):
    """The root is on PYTHONPATH: the import system lists it. The py_test's launcher
    reports what it looked for there, so a new NOTES.md holds; the attack: a package
    ``lib/`` that an ``import lib`` now finds first must re-run the test (and fail it)."""
    root = tmp_path / "ws"
    root.mkdir()
    (root / "MODULE.bazel").write_text("")
    (root / "lib.py").write_text("def double(x):\n    return 2 * x\n")
    (root / "lib_test.py").write_text(
        "import sys, lib\nassert lib.double(2) == 4\nprint(sys.argv, __name__)\n"
    )
    (root / "BUILD").write_text(
        'py_test(name = "lib_test", srcs = ["lib_test.py"], args = ["x"])\n'
    )
    # python3 is this interpreter (a pyenv shim is a shell script that execs python: a
    # process of two images, whose report memotest does not trust, holding the root whole).
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}

    def statuses() -> dict[str, str]:
        report = tmp_path / "report.json"
        memotest("build", "--json-report", str(report), cwd=root, env=env)
        return {t["name"]: t["status"] for t in json.loads(report.read_text())["targets"]}

    assert statuses() == {"//:lib_test": "passed"}
    assert (
        "['lib_test.py', 'x'] __main__"
        in memotest("show", "--log", "//:lib_test", cwd=root, env=env).stdout.decode()
    )
    (root / "NOTES.md").write_text("notes\n")
    explained = memotest("explain", "//:lib_test", cwd=root, env=env).stdout.decode()
    assert statuses() == {"//:lib_test": "cached"}, explained
    (root / "lib").mkdir()
    (root / "lib" / "__init__.py").write_text("def double(x):\n    return 5\n")
    assert statuses() == {"//:lib_test": "failed"}
