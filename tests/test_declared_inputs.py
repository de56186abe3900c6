"""Declared inputs that are globs or folders (issue 16, class 11): a glob holds by the
paths it matches and their contents, a folder by its entries recursively; each change
re-runs the target and ``explain`` says what changed. Real builds on real files."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import build_statuses, memotest, write_tree

TOML = """\
[targets.g]
command = "true"
inputs = ["data/*.csv"]

[targets.d]
command = "true"
inputs = ["tree"]
"""


def explain(root: Path, name: str) -> str:
    return memotest("explain", name, cwd=root).stdout.decode()


def project(tmp_path: Path) -> Path:
    root = write_tree(
        tmp_path / "p",
        {
            "memotest.toml": TOML,
            "data/a.csv": "1\n",
            "data/notes.txt": "n\n",
            "tree/x/y/z.txt": "z\n",
        },
    )
    code, out, statuses = build_statuses(root)
    assert code == 0 and statuses == {"g": "passed", "d": "passed"}, out
    code, out, statuses = build_statuses(root)
    assert statuses == {"g": "cached", "d": "cached"}, out
    return root


def test_new_match_of_a_glob_reruns(tmp_path: Path) -> None:
    root = project(tmp_path)
    (root / "data/b.csv").write_text("2\n")
    assert "new matches" in explain(root, "g") and "b.csv" in explain(root, "g")
    _, out, statuses = build_statuses(root)
    assert statuses == {"g": "passed", "d": "cached"}, out


def test_unrelated_file_does_not_rerun_a_glob(tmp_path: Path) -> None:
    root = project(tmp_path)
    (root / "data/other.txt").write_text("o\n")
    (root / "data/notes.txt").write_text("changed\n")
    _, out, statuses = build_statuses(root)
    assert statuses == {"g": "cached", "d": "cached"}, out


def test_editing_a_match_reruns(tmp_path: Path) -> None:
    root = project(tmp_path)
    (root / "data/a.csv").write_text("changed\n")
    assert "a.csv: content changed" in explain(root, "g")
    _, out, statuses = build_statuses(root)
    assert statuses == {"g": "passed", "d": "cached"}, out


def test_a_match_that_goes_reruns(tmp_path: Path) -> None:
    root = project(tmp_path)
    (root / "data/a.csv").unlink()
    assert "matches gone" in explain(root, "g")
    _, out, statuses = build_statuses(root)
    assert statuses["g"] == "passed", out


def test_file_added_deep_in_a_folder_reruns(tmp_path: Path) -> None:
    root = project(tmp_path)
    (root / "tree/x/y/new.txt").write_text("new\n")
    said = explain(root, "d")
    assert "tree/x/y" in said and "new.txt" in said, said
    _, out, statuses = build_statuses(root)
    assert statuses == {"g": "cached", "d": "passed"}, out


def test_file_edited_deep_in_a_folder_reruns(tmp_path: Path) -> None:
    root = project(tmp_path)
    (root / "tree/x/y/z.txt").write_text("edited\n")
    assert "z.txt: content changed" in explain(root, "d")
    _, out, statuses = build_statuses(root)
    assert statuses == {"g": "cached", "d": "passed"}, out


def test_folder_added_deep_in_a_folder_reruns(tmp_path: Path) -> None:
    root = project(tmp_path)
    (root / "tree/x/new").mkdir()
    _, out, statuses = build_statuses(root)
    assert statuses["d"] == "passed", out
    (root / "tree/x/new/f.txt").write_text("f\n")
    _, out, statuses = build_statuses(root)
    assert statuses["d"] == "passed", out
