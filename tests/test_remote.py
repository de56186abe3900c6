"""The remote cache on real servers (Redis, nginx WebDAV) and on servers that misbehave.

A second "machine" is the same project with an empty ``.memotest`` (at the same path, or a
clone at another): everything it replays came from the server, and was checked against
its own files first.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import build_statuses, write_tree
from servers import FakeServer, fake_server, nginx_dav, redis_server, silent_server

PROJECT = {
    "memotest.toml": """\
        [targets.a]
        command = "cat data.txt"
        [targets.b]
        command = "sh -c 'cat data.txt other.txt > out.txt'"
        outputs = ["out.txt"]
        [targets.c]
        command = "cat other.txt"
        """,
    "data.txt": "one\n",
    "other.txt": "other\n",
}

SERVERS = {"redis": redis_server, "nginx": nginx_dav}
#: Signing keys (at least 16 characters: memotest refuses a shorter one).
KEY_ONE = "key-one-0123456789abcdef"
KEY_TWO = "key-two-0123456789abcdef"


def env(**extra: str) -> dict[str, str]:
    out = {k: v for k, v in os.environ.items() if not k.startswith("MEMOTEST_REMOTE")}
    out.update(extra)
    return out


def empty_store(project: Path) -> None:
    """Another machine: the same files, nothing in ``.memotest``."""
    subprocess.run(["rm", "-rf", str(project / ".memotest")], check=True)


def remote_line(out: str) -> str:
    return next(line for line in out.splitlines() if line.startswith("remote: "))


@pytest.fixture(params=sorted(SERVERS))
def server(request, tmp_path):
    with SERVERS[request.param](tmp_path / "server") as s:
        yield s


def test_second_machine_replays_from_the_server(server, tmp_path):
    project = write_tree(tmp_path / "p", PROJECT)
    rc, out, st = build_statuses(project, "--remote", server.url, env=env())
    assert rc == 0 and set(st.values()) == {"passed"}, out
    assert remote_line(out) == "remote: 0 hits, 3 uploaded"
    empty_store(project)
    (project / "out.txt").unlink()
    rc, out, st = build_statuses(project, "--remote", server.url, env=env())
    assert rc == 0 and set(st.values()) == {"cached"}, out
    assert remote_line(out) == "remote: 3 hits, 0 uploaded"
    assert (project / "out.txt").read_text() == "one\nother\n"  # the output came along
    # A third machine whose data.txt differs: the records of a and b do not hold there.
    empty_store(project)
    (project / "data.txt").write_text("two\n")
    rc, out, st = build_statuses(project, "--remote", server.url, env=env())
    assert rc == 0 and st == {"a": "passed", "b": "passed", "c": "cached"}, out
    assert (project / "out.txt").read_text() == "two\nother\n"
    # Both variants are on the server now: each machine replays its own.
    for data in ("one\n", "two\n"):
        empty_store(project)
        (project / "data.txt").write_text(data)
        rc, out, st = build_statuses(project, "--remote", server.url, env=env())
        assert set(st.values()) == {"cached"}, out


def test_a_clone_at_another_path_replays_from_the_server(server, tmp_path):
    """Records travel portable: a clone elsewhere, with its own empty store, replays."""
    first = write_tree(tmp_path / "machine1" / "checkout", PROJECT)
    rc, out, st = build_statuses(first, "--remote", server.url, env=env())
    assert rc == 0 and set(st.values()) == {"passed"}, out
    clone = write_tree(tmp_path / "elsewhere" / "deeper" / "clone", PROJECT)
    rc, out, st = build_statuses(clone, "--remote", server.url, env=env())
    assert rc == 0 and set(st.values()) == {"cached"}, out
    assert (clone / "out.txt").read_text() == "one\nother\n"
    # An edit in the clone re-runs what read it there, and only there.
    (clone / "other.txt").write_text("changed\n")
    rc, out, st = build_statuses(clone, "--remote", server.url, env=env())
    assert st == {"a": "cached", "b": "passed", "c": "passed"}, out
    rc, out, st = build_statuses(first, env=env())
    assert set(st.values()) == {"cached"}, out


def test_setting_and_variable_name_the_remote(tmp_path):
    with redis_server(tmp_path / "server") as s:
        project = write_tree(tmp_path / "p", PROJECT)
        rc, out, _ = build_statuses(project, env=env(MEMOTEST_REMOTE=s.url))
        assert remote_line(out) == "remote: 0 hits, 3 uploaded", out
        empty_store(project)
        rc, out, st = build_statuses(project, "--no-remote", env=env(MEMOTEST_REMOTE=s.url))
        assert "remote:" not in out and set(st.values()) == {"passed"}, out
        empty_store(project)
        toml = project / "memotest.toml"
        toml.write_text(f'[settings]\nremote = "{s.url}"\n' + toml.read_text())
        rc, out, st = build_statuses(project, env=env())
        assert rc == 0 and remote_line(out).startswith("remote: 3 hits"), out
        # The flag wins over the variable, which wins over the setting.
        empty_store(project)
        bad = "http://127.0.0.1:1/nothing"
        rc, out, st = build_statuses(project, "--remote", s.url, env=env(MEMOTEST_REMOTE=bad))
        assert remote_line(out).startswith("remote: 3 hits"), out
        empty_store(project)
        rc, out, st = build_statuses(project, env=env(MEMOTEST_REMOTE=bad))
        assert set(st.values()) == {"passed"} and "127.0.0.1:1" in out, out


def test_read_only_uploads_nothing(tmp_path):
    with nginx_dav(tmp_path / "server") as s:
        project = write_tree(tmp_path / "p", PROJECT)
        rc, out, st = build_statuses(project, "--remote", s.url, "--remote-read-only", env=env())
        assert (
            rc == 0
            and set(st.values()) == {"passed"}
            and remote_line(out) == "remote: 0 hits, read-only"
        ), out
        empty_store(project)
        _rc, out, _st = build_statuses(
            project, "--remote", s.url, env=env(MEMOTEST_REMOTE_READ_ONLY="1")
        )
        assert remote_line(out) == "remote: 0 hits, read-only", out
        assert not any(p.is_file() for p in s.folder.rglob("*")), "something was uploaded"


# -- faults ------------------------------------------------------------------------------


def assert_went_on(rc: int, out: str, st: dict[str, str], url: str, errors: str) -> None:
    """The build finished locally, with no hit, one warning naming the remote, the count."""
    assert rc == 0 and set(st.values()) == {"passed"}, out
    warnings = [line for line in out.splitlines() if "warning: remote" in line]
    assert len(warnings) == 1 and url in warnings[0], out
    assert errors in warnings[0], out
    assert remote_line(out).startswith("remote: 0 hits"), out
    assert " error" in remote_line(out), out


def test_a_server_answering_500(tmp_path):
    fake = FakeServer(respond=lambda m, p, b: (500, b"oops"))
    with fake_server(fake) as s:
        project = write_tree(tmp_path / "p", PROJECT)
        rc, out, st = build_statuses(project, "--remote", s.url, env=env())
        assert_went_on(rc, out, st, s.url, "HTTP 500")
        assert any(r.startswith("HEAD") for r in fake.requests)  # a 500 is not a breaker


def test_a_server_answering_403_and_404_on_put(tmp_path):
    fake = FakeServer()
    with fake_server(fake) as s:
        fake.respond = lambda m, p, b: (403, b"") if m == "PUT" else fake_default(fake, m, p, b)
        project = write_tree(tmp_path / "p", PROJECT)
        rc, out, st = build_statuses(project, "--remote", s.url, env=env())
        assert_went_on(rc, out, st, s.url, "HTTP 403")
        fake.respond = lambda m, p, b: (404, b"") if m == "PUT" else fake_default(fake, m, p, b)
        empty_store(project)
        rc, out, st = build_statuses(project, "--remote", s.url, env=env())
        assert_went_on(rc, out, st, s.url, "HTTP 404")


def fake_default(fake: FakeServer, method: str, path: str, body: bytes) -> tuple[int, bytes]:
    respond, fake.respond = fake.respond, None
    try:
        return fake.answer(method, path, body)
    finally:
        fake.respond = respond


def test_a_server_answering_garbage(tmp_path):
    fake = FakeServer(respond=lambda m, p, b: (200, b"\x89garbage{" * 10))
    with fake_server(fake) as s:
        project = write_tree(tmp_path / "p", PROJECT)
        rc, out, st = build_statuses(project, "--remote", s.url, env=env())
        assert_went_on(rc, out, st, s.url, "does not parse")


def test_a_blob_changed_on_the_server(tmp_path):
    with nginx_dav(tmp_path / "server") as s:
        project = write_tree(tmp_path / "p", PROJECT)
        rc, out, st = build_statuses(project, "--remote", s.url, env=env())
        assert rc == 0, out
        blobs = list((s.folder / "cas").iterdir())
        assert blobs
        for blob in blobs:  # every record, log and output, changed in place
            data = blob.read_bytes()
            blob.write_bytes(data.replace(b"one", b"owe") if b"one" in data else data + b" ")
        empty_store(project)
        rc, out, st = build_statuses(project, "--remote", s.url, env=env())
        assert_went_on(rc, out, st, s.url, "does not match its sha256")


def test_a_server_that_never_answers(tmp_path):
    with silent_server() as url:
        files = dict(PROJECT)
        files["memotest.toml"] = "[settings]\nremote_timeout = 0.5\n" + PROJECT["memotest.toml"]
        for i in range(10):
            files["memotest.toml"] += f'[targets.more{i}]\ncommand = "cat data.txt"\n'
        project = write_tree(tmp_path / "p", files)
        local = write_tree(tmp_path / "local", files)
        started = time.monotonic()
        build_statuses(local, "--no-remote", "-j", "2", env=env())
        base = time.monotonic() - started  # the same build with no remote, under this load
        started = time.monotonic()
        rc, out, st = build_statuses(project, "--remote", url, "-j", "2", env=env())
        took = time.monotonic() - started
        assert_went_on(rc, out, st, url, "no answer within 0.5s")
        assert "not used for the rest of this build" in out
        assert remote_line(out) == "remote: 0 hits, 0 uploaded, 1 error", out
        # Paid per target, 13 timeouts would be 6.5s (3.2s on two threads).
        assert took - base < 2.5, f"the timeout was paid per target: {took:.1f}s ({base:.1f}s)"


def test_the_server_killed_in_the_middle_of_a_build(tmp_path):
    with redis_server(tmp_path / "server") as s:
        files = dict(PROJECT)
        files["memotest.toml"] += (
            "[targets.slow]\n"
            "command = \"sh -c 'touch started; while [ ! -e go ]; do sleep 0.05; done'\"\n"
            'needs = ["a"]\n'
            "[targets.after]\n"
            'command = "cat other.txt"\n'
            'needs = ["slow"]\n'
        )
        project = write_tree(tmp_path / "p", files)
        report = tmp_path / "report.json"
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "memotest",
                "build",
                "--remote",
                s.url,
                "-j",
                "1",
                "--json-report",
                str(report),
            ],
            cwd=project,
            env=env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 60
        while not (project / "started").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        s.kill()
        (project / "go").write_text("")
        out = proc.communicate(timeout=60)[0].decode()
        st = {t["name"]: t["status"] for t in json.loads(report.read_text())["targets"]}
        assert proc.returncode == 0 and set(st.values()) == {"passed"}, out
        warnings = [line for line in out.splitlines() if "warning: remote" in line]
        assert len(warnings) == 1 and s.url.split("/0")[0] in warnings[0], out
        assert "1 error" in remote_line(out), out


# -- trust -------------------------------------------------------------------------------


def test_signatures_are_enforced(tmp_path):
    with nginx_dav(tmp_path / "server") as s:
        project = write_tree(tmp_path / "p", PROJECT)
        rc, out, st = build_statuses(
            project, "--remote", s.url, env=env(MEMOTEST_REMOTE_KEY=KEY_ONE)
        )
        assert remote_line(out) == "remote: 0 hits, 3 uploaded", out
        # Another key: nothing is taken, each refusal is counted.
        empty_store(project)
        rc, out, st = build_statuses(
            project, "--remote", s.url, "--remote-read-only", env=env(MEMOTEST_REMOTE_KEY=KEY_TWO)
        )
        assert rc == 0 and set(st.values()) == {"passed"}, out
        assert remote_line(out) == "remote: 0 hits, read-only, 3 untrusted", out
        assert "signed with another key" in out
        # The right key: every record is taken.
        empty_store(project)
        rc, out, st = build_statuses(
            project, "--remote", s.url, "--remote-read-only", env=env(MEMOTEST_REMOTE_KEY=KEY_ONE)
        )
        assert set(st.values()) == {"cached"}, out


def test_unsigned_records_are_refused_when_a_key_is_set(tmp_path):
    with redis_server(tmp_path / "server") as s:
        project = write_tree(tmp_path / "p", PROJECT)
        rc, out, st = build_statuses(project, "--remote", s.url, env=env())
        assert remote_line(out) == "remote: 0 hits, 3 uploaded", out
        empty_store(project)
        rc, out, st = build_statuses(
            project, "--remote", s.url, "--remote-read-only", env=env(MEMOTEST_REMOTE_KEY=KEY_ONE)
        )
        assert rc == 0 and set(st.values()) == {"passed"}, out
        assert remote_line(out) == "remote: 0 hits, read-only, 3 untrusted", out
        assert "unsigned" in out


def test_a_signed_record_is_still_checked_against_the_files(tmp_path):
    """A signature says who uploaded a record, not that it holds here."""
    with redis_server(tmp_path / "server") as s:
        project = write_tree(tmp_path / "p", PROJECT)
        build_statuses(project, "--remote", s.url, env=env(MEMOTEST_REMOTE_KEY=KEY_ONE))
        empty_store(project)
        (project / "other.txt").write_text("changed\n")
        _rc, out, st = build_statuses(
            project, "--remote", s.url, env=env(MEMOTEST_REMOTE_KEY=KEY_ONE)
        )
        assert st == {"a": "cached", "b": "passed", "c": "passed"}, out


def test_redis_without_its_package_names_the_extra(tmp_path, monkeypatch):
    from memotest.remote.redis_backend import RedisBackend

    monkeypatch.setitem(sys.modules, "redis", None)
    with pytest.raises(ImportError, match=r"memotest\[redis\]"):
        RedisBackend("redis://127.0.0.1:1/0")


def test_commands_memoized_from_other_tools_use_the_remote(tmp_path, monkeypatch):
    """``run_memoized`` (the tox, nox and make adapters) takes ``MEMOTEST_REMOTE`` too."""
    from memotest.memo import run_memoized
    from memotest.model import Target

    with redis_server(tmp_path / "server") as s:
        project = write_tree(tmp_path / "p", {"data.txt": "one\n"})
        time.sleep(0.1)  # an input changed within 50 ms of a run's start makes it not reusable
        monkeypatch.setenv("MEMOTEST_REMOTE", s.url)
        t = Target(name="make:x", command="cat data.txt", cwd=str(project))
        first = run_memoized(t, root=project)
        assert first.status == "passed" and not first.cached
        empty_store(project)
        second = run_memoized(t, root=project)
        assert second.cached and second.log == b"one\n"
        empty_store(project)
        (project / "data.txt").write_text("two\n")
        third = run_memoized(t, root=project)
        assert not third.cached and third.log == b"two\n"


def test_a_path_that_is_not_utf8_travels_through_the_remote(tmp_path):
    """The wire keeps such a path as a ``\\udcff`` JSON escape: a second machine replays,
    and a change to the file there runs the target."""
    toml = {"memotest.toml": "[targets.a]\ncommand = \"sh -c 'cat caf*'\"\n"}
    project = write_tree(tmp_path / "p", toml)
    name = os.path.join(os.fsencode(project), b"caf\xe9")
    with open(name, "wb") as f:
        f.write(b"one\n")
    fake = FakeServer()
    with fake_server(fake) as s:
        rc, out, st = build_statuses(project, "--remote", s.url, env=env())
        assert rc == 0 and st == {"a": "passed"} and "Traceback" not in out, out
        assert remote_line(out) == "remote: 0 hits, 1 uploaded", out
        empty_store(project)
        rc, out, st = build_statuses(project, "--remote", s.url, env=env())
        assert rc == 0 and st == {"a": "cached"}, out
        empty_store(project)
        with open(name, "wb") as f:
            f.write(b"two\n")
        rc, out, st = build_statuses(project, "--remote", s.url, env=env())
        assert rc == 0 and st == {"a": "passed"}, out
