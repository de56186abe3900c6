"""What the remote is told by the user: its URL and its signing key, as an attacker (or a
CI secret that is not set) would give them. A value memotest cannot use is a clear
message and exit 2, before anything is sent; never a traceback, never "no key"."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from conftest import build_statuses, write_tree
from servers import FakeServer, fake_server
from test_remote import KEY_ONE, PROJECT, empty_store, env, remote_line


def build_env(project, environ: dict, *args: str) -> tuple[int, str]:
    """``memotest build ARGS`` with exactly ``environ`` (its keys and values may be bytes)."""
    proc = subprocess.run(
        [sys.executable, "-m", "memotest", "build", *args],
        cwd=project,
        env=environ,
        capture_output=True,
        timeout=60,
    )
    return proc.returncode, proc.stdout.decode() + proc.stderr.decode(errors="replace")


@pytest.mark.parametrize(
    "key", ["", " ", "\t\n", "short", "key-with-a-newline-at-the-end\n", "nul-\x01-0123456789abc"]
)
def test_an_unusable_key_is_an_error_never_no_key(tmp_path, key):
    """``MEMOTEST_REMOTE_KEY=`` (an unset CI secret) once meant "no key": records went up
    unsigned and a forged unsigned one was replayed. Now: exit 2, nothing sent."""
    project = write_tree(tmp_path / "p", PROJECT)
    fake = FakeServer()
    with fake_server(fake) as s:
        # A forged record: uploaded unsigned, by someone without the key.
        rc, out, _ = build_statuses(project, "--remote", s.url, env=env())
        assert rc == 0 and remote_line(out) == "remote: 0 hits, 3 uploaded", out
        empty_store(project)
        asked = len(fake.requests)
        rc, out, st = build_statuses(project, "--remote", s.url, env=env(MEMOTEST_REMOTE_KEY=key))
        assert rc == 2, out
        assert "MEMOTEST_REMOTE_KEY" in out and "Traceback" not in out, out
        assert "cached" not in st.values() and not st, out  # nothing ran, nothing replayed
        assert len(fake.requests) == asked, fake.requests[asked:]  # nothing sent


def test_a_key_that_is_not_utf8_is_an_error(tmp_path):
    project = write_tree(tmp_path / "p", PROJECT)
    environ = {os.fsencode(k): os.fsencode(v) for k, v in env().items()}
    environ[b"MEMOTEST_REMOTE_KEY"] = b"\xff\xfe-not-utf8-0123456789abcdef"
    with fake_server(FakeServer()) as s:
        rc, out = build_env(project, environ, "--remote", s.url)
    assert rc == 2 and "MEMOTEST_REMOTE_KEY is not UTF-8" in out and "Traceback" not in out, out


def test_no_remote_needs_no_key(tmp_path):
    """The key is checked only when a remote is used (``--no-remote``, none set)."""
    project = write_tree(tmp_path / "p", PROJECT)
    rc, out, _ = build_statuses(project, "--no-remote", env=env(MEMOTEST_REMOTE_KEY=""))
    assert rc == 0, out
    rc, out, _ = build_statuses(project, env=env(MEMOTEST_REMOTE_KEY=""))
    assert rc == 0, out


def test_a_usable_key_signs(tmp_path):
    project = write_tree(tmp_path / "p", PROJECT)
    fake = FakeServer()
    with fake_server(fake) as s:
        rc, out, _ = build_statuses(
            project, "--remote", s.url, env=env(MEMOTEST_REMOTE_KEY=KEY_ONE)
        )
        assert rc == 0 and remote_line(out) == "remote: 0 hits, 3 uploaded", out
    assert all(b'"sig": null' not in body for body in fake.store.values())


BAD_URLS = [
    "http://127.0.0.1:{port}/c\x01",  # a control character: once a traceback
    "http://127.0.0.1:{port}/c\x7f",
    "http://127.0.0.1:{port}/c d",
    "http://127.0.0.1:{port}/caf\u00e9",
    "http://exa\u00e4mple.com:{port}/c",
    "http://127.0.0.1:{port}/c\udcff",  # a byte that is not UTF-8 (surrogateescape)
    "http://127.0.0.1:99999/c",
    "http://127.0.0.1:0/c",
    "http://127.0.0.1:-1/c",
    "http://127.0.0.1:x/c",
    "http:///c",
    "http://[::1/c",
    "ftp://127.0.0.1:{port}/c",
    "redis://127.0.0.1:{port}/\x01",
    "redis://127.0.0.1:99999/0",
    "redis:///0",
]


#: Every bad URL by the variable; the flag and the setting go through the same check.
CASES = [(url, "variable") for url in BAD_URLS] + [
    (url, where) for url in BAD_URLS[:1] + BAD_URLS[3:5] for where in ("flag", "setting")
]


@pytest.mark.parametrize(("url", "where"), CASES)
def test_a_url_memotest_cannot_use_is_an_error(tmp_path, url, where):
    fake = FakeServer()
    with fake_server(fake) as s:
        port = s.url.split(":")[2].split("/")[0]
        url = url.replace("{port}", port)
        files = dict(PROJECT)
        args: list[str] = []
        extra: dict[str, str] = {}
        if where == "setting":
            if "\udcff" in url:
                pytest.skip("a TOML file is UTF-8: it cannot hold that byte")
            quoted = "".join(c if 32 <= ord(c) < 127 else f"\\u{ord(c):04x}" for c in url)
            files["memotest.toml"] = f'[settings]\nremote = "{quoted}"\n' + PROJECT["memotest.toml"]
        elif where == "flag":
            args = ["--remote", url]
        else:
            extra = {"MEMOTEST_REMOTE": url}
        project = write_tree(tmp_path / "p", files)
        environ = {os.fsencode(k): os.fsencode(v) for k, v in env(**extra).items()}
        argv = [os.fsencode(a) for a in args]
        proc = subprocess.run(
            [sys.executable, "-m", "memotest", "build", *argv],
            cwd=project,
            env=environ,
            capture_output=True,
            timeout=60,
        )
        out = proc.stdout.decode() + proc.stderr.decode(errors="replace")
    assert proc.returncode == 2, out
    assert "memotest: remote " in out and "Traceback" not in out, out
    assert not fake.requests, fake.requests
