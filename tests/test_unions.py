"""The union of the candidates' fingerprint ids, remembered between builds (issue 17's
no-op path, ``memotest/store/unions.py``), on real processes: a no-op build keeps it in
the transaction that marks its replays used, the next one reads it, and what it shortcuts
stays exact: an input changed under a remembered union re-runs exactly the targets that
read it, and a damaged entry is a miss, never a wrong answer."""

from __future__ import annotations

import json
import sqlite3
import textwrap
from pathlib import Path

from conftest import build_statuses, write_tree

N = 16  # memotest.store.unions.MIN_RECORDS: fewer are not remembered


def _project(root: Path) -> Path:
    files = {"src/common.txt": "shared\n"}
    toml = []
    for i in range(N):
        files[f"src/t{i}.txt"] = f"own {i}\n"
        toml.append(f'[targets.t{i}]\ncommand = "cat src/common.txt src/t{i}.txt"\n')
    write_tree(root, files)
    (root / "memotest.toml").write_text(textwrap.dedent("\n".join(toml)))
    return root


def _statuses(root: Path) -> dict[str, str]:
    _code, out, statuses = build_statuses(root)
    assert statuses, out
    return statuses


def _unions(root: Path) -> list[dict]:
    with sqlite3.connect(root / ".memotest" / "db.sqlite") as conn:
        row = conn.execute("SELECT value FROM meta WHERE key = 'plan-unions'").fetchone()
    return json.loads(row[0]) if row else []


def test_a_noop_build_keeps_the_union_and_changes_still_rerun(tmp_path: Path) -> None:
    root = _project(tmp_path / "p")
    assert set(_statuses(root).values()) == {"passed"}
    assert set(_statuses(root).values()) == {"cached"}
    kept = _unions(root)
    assert len(kept) == 1 and kept[0]["key"] and kept[0]["ids"]
    assert set(_statuses(root).values()) == {"cached"}  # read, not merged again
    assert _unions(root) == kept
    write_tree(root, {"src/t3.txt": "own 3, changed\n"})
    statuses = _statuses(root)
    assert statuses.pop("t3") == "passed"
    assert set(statuses.values()) == {"cached"}
    write_tree(root, {"src/common.txt": "shared, changed\n"})
    assert set(_statuses(root).values()) == {"passed"}
    assert set(_statuses(root).values()) == {"cached"}


def test_a_damaged_union_is_a_miss(tmp_path: Path) -> None:
    root = _project(tmp_path / "p")
    assert set(_statuses(root).values()) == {"passed"}
    assert set(_statuses(root).values()) == {"cached"}
    kept = _unions(root)
    entry = dict(kept[0])
    entry["check"] = "0" * 32  # ids that do not match their digest
    with sqlite3.connect(root / ".memotest" / "db.sqlite") as conn:
        conn.execute("UPDATE meta SET value = ? WHERE key = 'plan-unions'", (json.dumps([entry]),))
    write_tree(root, {"src/t5.txt": "own 5, changed\n"})
    statuses = _statuses(root)
    assert statuses.pop("t5") == "passed"
    assert set(statuses.values()) == {"cached"}
    with sqlite3.connect(root / ".memotest" / "db.sqlite") as conn:
        conn.execute("UPDATE meta SET value = 'not json' WHERE key = 'plan-unions'")
    assert set(_statuses(root).values()) == {"cached"}


def test_an_id_array_that_does_not_decode_is_damage(tmp_path: Path) -> None:
    """The arrays are decompressed only when the check looks at them: one that does not
    decode still sets the database aside, and the build runs the targets and heals."""
    root = _project(tmp_path / "p")
    assert set(_statuses(root).values()) == {"passed"}
    with sqlite3.connect(root / ".memotest" / "db.sqlite") as conn:
        conn.execute("UPDATE records SET inputs = x'00112233'")  # the rest of the row is fine
    code, out, statuses = build_statuses(root)
    assert "Traceback" not in out and code == 0, out
    assert set(statuses.values()) == {"passed"}, out  # never a hit from a damaged store
    assert "damaged" in out
    assert set(_statuses(root).values()) == {"cached"}
