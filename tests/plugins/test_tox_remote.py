"""tox in CI with a remote cache, as ``docs/adapters/tox.md`` sets it up: ``MEMOTEST_REMOTE``
in tox's environment, a second CI runner (a fresh checkout at the runner's usual path: no
``.tox``, no ``.memotest``) replays the env from the server, a pull request's job
(``MEMOTEST_REMOTE_READ_ONLY=1``) runs and uploads nothing. Real tox, real nginx (WebDAV)
on 127.0.0.1. (A checkout at *another* path re-runs once with tox's virtualenv: it writes
the env's absolute path into ``pyvenv.cfg``, an input; see the docs.)"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from servers import nginx_dav
from test_tox import count, environ, proj_files, tox, write
from test_tox import pytestmark as tox_marks

pytestmark = tox_marks


@pytest.fixture
def server(tmp_path):
    """nginx only: what this file adds is tox's (``MEMOTEST_REMOTE`` and
    ``MEMOTEST_REMOTE_READ_ONLY`` through tox's environment to the plugin), the same for
    every backend. Redis under the plugins' ``run_memoized`` is
    test_remote.py's ``test_commands_memoized_from_other_tools_use_the_remote``; each
    backend's second machine, test_remote.py's ``server`` cases."""
    with nginx_dav(tmp_path / "server") as s:
        yield s


def clone(at: Path, counter: Path) -> Path:
    """A checkout: a skip_install env that bumps ``counter`` and prints ``data.txt``."""
    return write(at, proj_files(counter))


def ci_env(url: str, **extra: str) -> dict[str, str]:
    out = {k: v for k, v in environ().items() if not k.startswith("MEMOTEST_REMOTE")}
    return {**out, "MEMOTEST_REMOTE": url, **extra}


def fresh_runner(at: Path, counter: Path) -> Path:
    """Another CI runner: a new checkout at the same path, no ``.tox``, no ``.memotest``."""
    shutil.rmtree(at)
    return clone(at, counter)


def test_a_second_ci_runner_replays_a_pull_request_uploads_nothing(server, tmp_path):
    counter = tmp_path / "counter"
    at = tmp_path / "runner" / "work" / "checkout"
    clone(at, counter)
    code, out = tox(at, "-e", "py", env=ci_env(server.url))
    assert code == 0 and "memotest: ran: never run" in out and count(counter) == 1, out
    # Another runner: the env is made anew, the record comes from the server.
    fresh_runner(at, counter)
    code, out = tox(at, "-e", "py", env=ci_env(server.url))
    assert code == 0 and "memotest: cached, replayed" in out and count(counter) == 1, out
    assert "content: one" in out, out  # the log came along
    # A pull request changes data.txt: its job runs the env and uploads nothing.
    fresh_runner(at, counter)
    (at / "data.txt").write_text("two\n")
    read_only = ci_env(server.url, MEMOTEST_REMOTE_READ_ONLY="1")
    code, out = tox(at, "-e", "py", env=read_only)
    assert code == 0 and "content: two" in out and count(counter) == 2, out
    # So the next runner with that change runs it too: nothing was uploaded.
    fresh_runner(at, counter)
    (at / "data.txt").write_text("two\n")
    code, out = tox(at, "-e", "py", env=ci_env(server.url))
    assert code == 0 and "content: two" in out and count(counter) == 3, out
    # And the first state still replays on a fresh runner.
    fresh_runner(at, counter)
    code, out = tox(at, "-e", "py", env=ci_env(server.url))
    assert code == 0 and "memotest: cached, replayed" in out and count(counter) == 3, out
