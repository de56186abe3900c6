"""Many recorded runs per target, on real processes: a branch switched back to replays, the
newest holding run decides (a flaky fail is never hidden by an older pass), the store's
size bound evicts the least recently used runs, and ``explain`` names the one that ran
last."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

from conftest import build_statuses, memotest, write_tree

PY = sys.executable


def _project(root: Path, toml: str, files: dict[str, str]) -> Path:
    write_tree(root, files)
    (root / "memotest.toml").write_text(textwrap.dedent(toml))
    return root


def _statuses(root: Path, *args: str) -> dict[str, str]:
    _code, out, statuses = build_statuses(root, *args)
    assert statuses, out
    return statuses


BRANCH = """
    [targets.a]
    command = "grep -q A src/a.txt"
    [targets.b]
    command = "cat src/b.txt"
"""


def test_a_branch_switched_back_to_replays(tmp_path: Path) -> None:
    root = _project(tmp_path / "p", BRANCH, {"src/a.txt": "A\n", "src/b.txt": "one\n"})
    assert _statuses(root) == {"a": "passed", "b": "passed"}
    assert _statuses(root) == {"a": "cached", "b": "cached"}
    write_tree(root, {"src/a.txt": "A B\n", "src/b.txt": "two\n"})  # branch B
    assert _statuses(root) == {"a": "passed", "b": "passed"}
    write_tree(root, {"src/a.txt": "A\n", "src/b.txt": "one\n"})  # back to A: new mtimes
    assert _statuses(root) == {"a": "cached", "b": "cached"}
    write_tree(root, {"src/a.txt": "A B\n", "src/b.txt": "two\n"})  # and B again
    assert _statuses(root) == {"a": "cached", "b": "cached"}
    shown = memotest("show", "a", cwd=root).stdout.decode()
    assert "recorded runs (variants): 2" in shown, shown


FLAKY = f"""
    [settings]
    ignore = ["knob"]
    [targets.t]
    command = "{PY} check.py"
"""

CHECK = """
    from pathlib import Path

    Path("state").read_text()
    if Path("knob").read_text().strip() != "pass":
        Path("extra").read_text()  # the failing run reads more than the passing one
        raise SystemExit(1)
"""


def test_a_newer_fail_of_the_same_state_is_never_hidden_by_an_older_pass(tmp_path: Path) -> None:
    files = {"check.py": CHECK, "state": "s\n", "extra": "e\n", "knob": "pass\n"}
    root = _project(tmp_path / "p", FLAKY, files)
    assert _statuses(root) == {"t": "passed"}
    (root / "knob").write_text("fail\n")  # unseen by memotest: a flaky outcome
    assert _statuses(root, "--force") == {"t": "failed"}
    (root / "knob").write_text("pass\n")
    # Both runs' inputs hold; the newest (the fail) decides: the target runs.
    explained = memotest("explain", "t", cwd=root).stdout.decode()
    assert "last run failed" in explained, explained
    assert _statuses(root) == {"t": "passed"}
    assert _statuses(root) == {"t": "cached"}
    # The same observations keep one result: the pass replaced the first pass.
    shown = memotest("show", "t", cwd=root).stdout.decode()
    assert "recorded runs (variants): 2" in shown, shown


def test_explain_names_the_variant_that_ran_last(tmp_path: Path) -> None:
    toml = """
        [targets.t]
        command = "cat x.txt y.txt z.txt"
    """
    root = _project(tmp_path / "p", toml, {"x.txt": "1\n", "y.txt": "1\n", "z.txt": "1\n"})
    assert _statuses(root) == {"t": "passed"}
    write_tree(root, {"x.txt": "2\n", "y.txt": "2\n", "z.txt": "2\n"})
    assert _statuses(root) == {"t": "passed"}
    write_tree(root, {"x.txt": "1\n", "y.txt": "1\n", "z.txt": "3\n"})
    explained = memotest("explain", "t", cwd=root).stdout.decode()
    # The newest variant ran last: all three changed since (the first, only z.txt).
    assert f"{root / 'x.txt'}: content changed (and 2 more changed inputs) [the last of 2" in (
        explained
    )
    every = memotest("explain", "-v", "t", cwd=root).stdout.decode()
    for name in ("x.txt", "y.txt", "z.txt"):
        assert f"    {root / name}: content changed" in every, every


SIZED = f"""
    [settings]
    max_size = "750 kB"
    [targets.t]
    command = "{PY} noise.py"
"""

NOISE = """
    import random, sys

    random.seed(open("v").read())
    sys.stdout.buffer.write(random.randbytes(200000))
"""


def test_the_size_bound_keeps_the_most_recently_used_and_clean_gc_applies_it(
    tmp_path: Path,
) -> None:
    root = _project(tmp_path / "p", SIZED, {"v": "1", "noise.py": NOISE})
    for v in "123":  # three variants of ~200 kB logs each
        (root / "v").write_text(v)
        assert _statuses(root) == {"t": "passed"}
    (root / "v").write_text("1")
    assert _statuses(root) == {"t": "cached"}  # 1 is now more recently used than 2 and 3
    (root / "v").write_text("4")
    assert _statuses(root, "-v") == {"t": "passed"}  # over 750 kB: the least recent goes
    (root / "v").write_text("1")
    assert _statuses(root) == {"t": "cached"}
    (root / "v").write_text("2")
    assert _statuses(root) == {"t": "passed"}  # evicted
    size = sum(f.stat().st_size for f in (root / ".memotest").rglob("*") if f.is_file())
    assert size < 1_200_000, size
    # clean --gc applies a smaller bound: one ~200 kB variant is left of the three.
    shown = memotest("show", "t", cwd=root).stdout.decode()
    assert "recorded runs (variants): 3" in shown, shown
    toml = (root / "memotest.toml").read_text().replace('"750 kB"', '"300 kB"')
    (root / "memotest.toml").write_text(toml)
    out = memotest("clean", "--gc", cwd=root).stdout.decode()
    assert "evicted 2 least recently used records" in out, out
    shown = memotest("show", "t", cwd=root).stdout.decode()
    assert "recorded runs (variants): 1" in shown, shown
