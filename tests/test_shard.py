"""``memotest build --shard I/N``: every target in exactly one shard, balanced by recorded
durations, ``needs`` kept within a shard; real builds of a real targets file."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from conftest import memotest, write_tree
from servers import redis_server

from memotest.errors import UsageError
from memotest.loop.shard import Shard, assign, parse_shard, plan_shards
from memotest.model import Target

SLEEPS = {"a": 0.8, "b": 0.6, "c": 0.4, "d": 0.2, "e": 0.2, "f": 0.2}


def _project(root: Path) -> Path:
    lines = ["[settings]", "jobs = 1", ""]
    for name, secs in SLEEPS.items():
        lines += [f"[targets.{name}]", f'command = "sleep {secs}"', ""]
    lines += [
        "[targets.setup]",
        'command = "echo setup > setup.txt"',
        'outputs = ["setup.txt"]',
        "",
    ]
    lines += ["[targets.uses-setup]", 'command = "cat setup.txt"', 'needs = ["setup"]', ""]
    return write_tree(root, {"memotest.toml": "\n".join(lines)})


def _shard(root: Path, spec: str, *args: str, env: dict | None = None) -> tuple[int, str, dict]:
    report = root.parent / f"{root.name}-{spec.replace('/', '-')}.json"
    proc = memotest(
        "build", "--shard", spec, "--json-report", str(report), *args, cwd=root, env=env
    )
    data = json.loads(report.read_text()) if report.exists() else {}
    return proc.returncode, proc.stdout.decode() + proc.stderr.decode(), data


def test_the_shards_cover_every_target_once_balanced_by_recorded_durations(tmp_path: Path):
    root = _project(tmp_path / "p")
    assert memotest("build", cwd=root).returncode == 0  # records every duration
    assigned: list[str] = []
    estimates = []
    for i in (1, 2, 3):
        # Each shard a machine of its own, from the same recorded state (as CI jobs are).
        machine = tmp_path / f"machine{i}" / "p"
        shutil.copytree(root, machine, symlinks=True)
        code, out, data = _shard(machine, f"{i}/3")
        assert code == 0, out
        shard = data["shard"]
        assert (shard["index"], shard["count"], shard["selected"]) == (i, 3, 8)
        assigned += shard["assigned"]
        estimates.append(shard["estimate"])
        ran = {t["name"] for t in data["targets"]}
        assert ran == set(shard["assigned"]) | set(shard["needed"])
        assert f"shard {i}/3: {len(shard['assigned'])} of 8 targets" in out
        if "uses-setup" in shard["assigned"]:
            assert "setup" in ran  # a need runs in the shard of what needs it
            names = [t["name"] for t in data["targets"]]
            assert names.index("setup") < names.index("uses-setup")
    assert sorted(assigned) == sorted([*SLEEPS, "setup", "uses-setup"])
    # 2.4 s of sleeps and two quick targets in three shards: a (0.8) alone, b+d (0.8),
    # c+e+f (0.8) give each about a third; none gets more than half of the work.
    assert max(estimates) <= 0.5 * sum(estimates), estimates


def test_a_shard_is_the_same_on_every_machine_with_the_same_durations():
    durations = {f"t{i}": float(i % 7) for i in range(40)}
    first = assign(list(durations), durations, 4)
    again = assign(list(reversed(list(durations))), dict(reversed(list(durations.items()))), 4)
    assert first == again
    assert sorted(n for s in first for n in s) == sorted(durations)


def test_new_targets_spread_evenly():
    names = [f"new{i}" for i in range(10)]
    shards = assign(names, {}, 3)
    assert sorted(len(s) for s in shards) == [3, 3, 4]


def test_needs_of_a_shard_come_along_even_if_assigned_elsewhere():
    targets = [
        Target(name="build-ext", command="make", cwd="/"),
        *(Target(name=f"t{i}", command="true", cwd="/", needs=("build-ext",)) for i in range(4)),
    ]
    seen: set[str] = set()
    for i in (1, 2):
        order, plan = plan_shards(targets, {"build-ext": 30.0}, Shard(i, 2))
        names = [t.name for t in order]
        assert "build-ext" in names and names[0] == "build-ext"
        seen.update(plan.assigned)
    assert seen == {t.name for t in targets}


BAD_SHARDS = [
    "0/3",
    "4/3",
    "3",
    "a/b",
    "1/0",
    "-1/2",
    "1/-1",
    "",
    "/",
    "1/2/3",
    "1.0/2",
    " 1/2",
    "1/2\n",
    "1_0/20",
    "\uff11/\uff12",  # fullwidth digits, which int() takes
    "\u0661/\u0662",  # Arabic-Indic digits
    "1/10001",
    "1/100000000000",  # once a MemoryError
    "1/99999999999999999999999",  # once an OverflowError
    "1/" + "9" * 5000,  # past int()'s digit limit
]


@pytest.mark.parametrize("text", BAD_SHARDS)
def test_a_bad_shard_is_a_usage_error(text: str):
    with pytest.raises(UsageError, match="--shard"):
        parse_shard(text)


@pytest.mark.parametrize("text", ["1/100000000000", "1/99999999999999999999999", "\uff11/\uff12"])
def test_a_huge_or_foreign_shard_count_exits_2_without_a_traceback(tmp_path: Path, text: str):
    root = _project(tmp_path / "p")
    proc = memotest("build", f"--shard={text}", cwd=root, timeout=60)
    err = proc.stderr.decode()
    assert proc.returncode == 2, err
    assert "--shard" in err and "Traceback" not in err, err


def test_more_shards_than_targets_leaves_the_last_ones_empty():
    targets = [Target(name=n, command="true", cwd="/") for n in "abc"]
    seen = []
    for i in range(1, 6):
        order, plan = plan_shards(targets, {}, Shard(i, 5))
        assert (len(order) == 0) == (i > 3), (i, order)
        seen += plan.assigned
    assert sorted(seen) == ["a", "b", "c"]
    assert assign(["a", "b"], {}, 10_000) == [["a"], ["b"]]


def test_a_bad_shard_on_the_command_line_exits_2_without_a_traceback(tmp_path: Path):
    root = _project(tmp_path / "p")
    proc = memotest("build", "--shard", "5/4", cwd=root)
    err = proc.stderr.decode()
    assert proc.returncode == 2
    assert "--shard" in err and "Traceback" not in err


def test_shards_with_empty_stores_balance_by_the_remotes_durations(tmp_path: Path):
    """CI jobs start with empty stores: the durations come from the remote, so the clone
    splits as the machine that recorded them would."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMOTEST_REMOTE")}
    with redis_server(tmp_path / "redis") as server:
        first = _project(tmp_path / "machine1" / "p")
        assert memotest("build", "--remote", server.url, cwd=first, env=env).returncode == 0
        mine = {i: _shard(first, f"{i}/3", "-n")[2] for i in (1, 2, 3)}
        for i in (1, 2, 3):
            clone = _project(tmp_path / f"shard{i}" / "p")
            # Read-only: a shard that uploads durations changes what a later one reads.
            args = ("--remote", server.url, "--remote-read-only")
            code, out, theirs = _shard(clone, f"{i}/3", *args, env=env)
            assert code == 0, out
            assert theirs["shard"]["assigned"] == mine[i]["shard"]["assigned"], out
            estimate = pytest.approx(mine[i]["shard"]["estimate"], abs=0.01)
            assert theirs["shard"]["estimate"] == estimate, out


def test_garbage_durations_on_the_remote_split_by_count(tmp_path: Path):
    """The remote's durations only balance shards: garbage there is warned about and
    counted, and the split falls back to counting targets; never a failed build."""
    import redis

    from memotest.remote.durations import durations_key

    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMOTEST_REMOTE")}
    with redis_server(tmp_path / "redis") as server:
        first = _project(tmp_path / "machine1" / "p")
        assert memotest("build", "--remote", server.url, cwd=first, env=env).returncode == 0
        key = durations_key("@project/memotest.toml")
        client = redis.Redis.from_url(server.url)
        assert client.get(f"memotest/ac/{key}") is not None  # the build published them
        client.set(f"memotest/ac/{key}", b"not json")
        clone = _project(tmp_path / "clone" / "p")
        args = ("--remote", server.url, "--remote-read-only")
        code, out, data = _shard(clone, "1/3", *args, env=env)
        assert code == 0 and "Traceback" not in out, out
        assert "warning: remote" in out and "error" in out, out
        assert data["shard"]["total"] == 8.0  # every target counted as 1 s: no durations
