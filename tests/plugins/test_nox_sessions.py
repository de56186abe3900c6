"""The nox loader and helper as a user meets them: skipped sessions, non-default sessions,
what the helper says, and ``memotest list`` beside a noxfile. Real nox, real processes."""

from __future__ import annotations

import os
import re
import shutil
import textwrap
from pathlib import Path

import pytest
from conftest import build_statuses, memotest, write_tree
from test_nox import NOX, counter, nox

pytestmark = pytest.mark.skipif(NOX is None, reason="nox is not installed")


def environ(**extra: str) -> dict[str, str]:
    env = dict(os.environ, PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_NO_INDEX="1", NO_COLOR="1")
    for name in ("MEMOTEST_NOX", "CI", "NOXSESSION"):  # CI makes a missing python an error
        env.pop(name, None)
    env.update(extra)
    return env


def build(root: Path, *args: str) -> tuple[int, str, dict[str, str]]:
    return build_statuses(root, *args, env=environ(), report=root.parent / "report.json")


SKIPPING = """
    import os
    import nox

    @nox.session(python="3.99")
    def missing(session):
        session.run("python", "-c", "print('never')")

    @nox.session(venv_backend="none")
    def later(session):
        if not os.path.exists("ready"):
            session.skip("not ready yet")
        session.run("python", "-c", "open('../counter', 'a').write('x\\\\n')")

    @nox.session(venv_backend="none")
    def fine(session):
        session.run("python", "-c", "print('fine')")
"""


#: A missing interpreter under the uv backend: skipped too (with uv installed).
UV_SKIPPING = """
    @nox.session(python="3.99", venv_backend="uv")
    def missing_uv(session):
        session.run("python", "-c", "print('never')")
"""


def test_a_session_nox_skips_is_skipped_never_a_cached_pass(tmp_path):
    uv = shutil.which("uv") is not None
    noxfile = textwrap.dedent(SKIPPING) + (textwrap.dedent(UV_SKIPPING) if uv else "")
    root = write_tree(tmp_path / "proj", {"noxfile.py": noxfile})
    count = tmp_path / "counter"
    junit = tmp_path / "junit.xml"
    skips = 3 if uv else 2
    for _ in range(2):  # and the second build does not replay the skip as a pass
        code, out, st = build(root, "--junit-xml", str(junit))
        assert code == 0, out  # a skip is not a failure
        assert st["nox:missing"] == "skipped", out
        assert st["nox:later"] == "skipped", out
        assert not uv or st["nox:missing_uv"] == "skipped", out
        assert "Python interpreter 3.99 not found" in out
        assert "not ready yet" in out
        assert f"{skips} skipped" in out
        assert junit.read_text().count("<skipped") == skips
    assert st["nox:fine"] == "cached"
    proc = memotest("explain", "nox:later", cwd=root, env=environ())
    assert "skipped" in proc.stdout.decode(), proc.stdout.decode()

    # What made it skip changes: it runs, and its pass is recorded then replayed.
    (root / "ready").write_text("")
    code, out, st = build(root, "nox:later")
    assert st == {"nox:later": "passed"}, out
    assert counter(count) == 1
    code, out, st = build(root, "nox:later")
    assert st == {"nox:later": "cached"}, out


NON_DEFAULT = """
    import nox

    @nox.session(venv_backend="none")
    def tests(session):
        session.run("python", "-c", "print('tests')")

    @nox.session(venv_backend="none", default=False)
    def docs(session):
        session.run("python", "-c", "open('../docs-ran', 'a').write('x\\\\n')")
"""


def test_non_default_sessions_are_listed_marked_and_can_be_named(tmp_path):
    root = write_tree(tmp_path / "proj", {"noxfile.py": NON_DEFAULT})
    proc = memotest("list", "--from", "nox", cwd=root, env=environ())
    listed = proc.stdout.decode()
    assert proc.returncode == 0, proc.stderr.decode()
    lines = {ln.split()[0]: ln for ln in listed.splitlines() if ln.startswith("nox:")}
    assert "not default" in lines["nox:docs"] and "not default" not in lines["nox:tests"]

    _code, out, st = build(root)  # what `nox` alone runs
    assert st == {"nox:tests": "passed"}, out
    _code, out, st = build(root, "--from", "nox", "nox:docs")
    assert st == {"nox:docs": "passed"}, out
    assert counter(tmp_path / "docs-ran") == 1
    # NOXSESSION chooses the default, as for nox itself.
    proc = memotest("build", cwd=root, env=environ(NOXSESSION="docs"))
    assert "nox:docs" in proc.stdout.decode() and "nox:tests" not in proc.stdout.decode()


HELPER = """
    import nox
    from memotest_nox import memoized

    @nox.session(venv_backend="none")
    @memoized
    def tests(session):
        session.run("python", "-c", "print(open('data.txt').read())")
"""


def test_the_helper_says_why_a_call_ran_and_list_shows_its_records(tmp_path):
    root = write_tree(tmp_path / "proj", {"noxfile.py": HELPER, "data.txt": "one"})
    code, out = nox(root, "-s", "tests", env=environ())
    assert code == 0, out
    assert "memotest: nox:tests:1 ran: never run (no record)" in out
    code, out = nox(root, "-s", "tests", env=environ())
    assert "nox:tests:1 is up to date: cached, replayed" in out, out
    (root / "data.txt").write_text("two")
    code, out = nox(root, "-s", "tests", env=environ())
    assert re.search(r"nox:tests:1 ran: \S*data.txt: content changed", out), out

    # memotest list beside the noxfile: the sessions, then the helper's records.
    proc = memotest("list", cwd=root, env=environ())
    listed = proc.stdout.decode()
    assert proc.returncode == 0, proc.stderr.decode()
    assert "nox:tests " in listed or "nox:tests\n" in listed
    assert re.search(r"^\s+nox:tests:1\s+last passed", listed, re.M), listed


HELPER_SKIP = """
    import nox
    from memotest_nox import memoized

    @nox.session(venv_backend="none")
    @memoized
    def probe(session):
        session.run(
            "sh", "-c", "echo x >> ../counter; echo 'no docker' > \\"$MEMOTEST_SKIP_FILE\\"",
            external=True,
        )
        session.run("sh", "-c", "echo never-reached", external=True)
"""


def test_a_memoized_call_that_says_it_skipped_skips_the_session(tmp_path):
    root = write_tree(tmp_path / "proj", {"noxfile.py": HELPER_SKIP})
    for n in (1, 2):  # never replayed: it runs again
        code, out = nox(root, "-s", "probe", env=environ())
        assert code == 0, out
        assert "Session probe skipped: nox:probe:1: no docker" in out, out
        assert "never-reached" not in out
        assert counter(tmp_path / "counter") == n


INSTALL_ENV = """
    import nox

    @nox.session(venv_backend="none")
    def tests(session):
        import os
        names = ("PIP_INDEX_URL", "UV_INDEX_URL", "SSL_CERT_FILE", "https_proxy")
        session.run("python", "-c", f"print({[os.environ.get(n) for n in names]!r})")
"""


def test_a_session_gets_what_its_installs_need_to_reach_an_index(tmp_path):
    # Behind a proxy or a private index (PIP_INDEX_URL, SSL_CERT_FILE...), a session
    # whose installs cannot reach it fails where plain nox passes.
    root = write_tree(tmp_path / "proj", {"noxfile.py": INSTALL_ENV})
    given = {
        "PIP_INDEX_URL": "file:///idx",
        "UV_INDEX_URL": "file:///uv",
        "SSL_CERT_FILE": "/certs.pem",
        "https_proxy": "http://127.0.0.1:9",
    }
    proc = memotest("build", "--from", "nox", cwd=root, env=environ(**given))
    assert proc.returncode == 0, proc.stdout.decode() + proc.stderr.decode()
    log = memotest("show", "nox:tests", "--log", "--from", "nox", cwd=root, env=environ(**given))
    assert str(list(given.values())) in log.stdout.decode(), log.stdout.decode()
