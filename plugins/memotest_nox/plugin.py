"""memotest plugin for nox: the sessions of a noxfile as targets.

``memotest build -f noxfile.py`` (or ``--from nox``, or just ``memotest build`` in a folder
with a ``noxfile.py`` and no ``memotest.toml``) asks nox itself for the sessions it would
run (``nox --list --json``) and makes one target per session::

    nox:<session>   command: nox -R -s <session> -f noxfile.py   cwd: the noxfile's folder

``-R`` is nox's "reuse the virtualenv and skip installs when it is reused". It is what
makes a session target cacheable: an install contacts the package index, and a target that
connects to a non-loopback address is never cached. The venv's files are read by the
session's commands, so they are traced inputs: rebuilding the venv re-runs the target.
The price is nox's own: after changing a session's ``session.install`` list, run
``nox -s <session>`` once (without ``-R``) to rebuild its venv.

Import cost matters (every ``memotest`` command imports every plugin): nothing here imports
nox; nox runs in a subprocess, the one the user would run.
"""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from memotest.errors import ConfigError
from memotest.hookspecs import hookimpl
from memotest.lazy import lazy_module
from memotest.load.config import DEFAULT_PASS_ENV, Project, Settings
from memotest.load.plugins import LoadRequest
from memotest.model import SourceLocation, Target

if TYPE_CHECKING:
    import subprocess
else:  # every command loads this plugin; nox is only started where there is a noxfile
    subprocess = lazy_module("subprocess")

NOXFILE = "noxfile.py"
#: Variables nox itself reads (NOXSESSION, NOX_DEFAULT_VENV_BACKEND, NO_COLOR, CI decides
#: whether a missing interpreter is an error): passed to the targets and part of their key.
#: nox's own, and what a session's installs need to reach an index (as tox passes by
#: default): a session that cannot install fails where plain nox passes.
NOX_PASS_ENV = (
    "NOX*",
    "NO_COLOR",
    "FORCE_COLOR",
    "CI",
    "PIP_*",
    "UV_*",
    "VIRTUALENV_*",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "REQUESTS_CA_BUNDLE",
    "CURL_CA_BUNDLE",
    "http_proxy",
    "https_proxy",
    "no_proxy",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "NO_PROXY",
)
LIST_TIMEOUT = 120.0


@hookimpl
def memotest_load_targets(request: LoadRequest) -> Project | None:
    noxfile = _claimed_noxfile(request)
    if noxfile is None:
        return None
    return load(noxfile)


def _claimed_noxfile(request: LoadRequest) -> Path | None:
    if request.source not in (None, "nox"):
        return None
    if request.path is not None:
        if request.source is None and request.path.name != NOXFILE:
            return None
        path = request.path if request.path.is_absolute() else request.cwd / request.path
        if not path.is_file():
            raise ConfigError(f"{path}: nox: no such file")
        return path.resolve()
    candidate = request.cwd / NOXFILE
    if candidate.is_file():
        return candidate.resolve()
    if request.source == "nox":
        raise ConfigError(f"nox: no {NOXFILE} in {request.cwd} (name one with -f FILE)")
    return None


def nox_command() -> list[str]:
    """How to run nox: the ``nox`` installed beside memotest's interpreter (the usual
    ``pip install memotest nox`` in one environment), else the ``nox`` on PATH."""
    beside = Path(sys.executable).parent / "nox"
    if beside.is_file() and os.access(beside, os.X_OK):
        return [str(beside)]
    found = shutil.which("nox")
    if found:
        return [found]
    raise ConfigError(
        f"nox: the nox command was not found beside {sys.executable} nor on PATH (pip install nox)"
    )


def load(noxfile: Path) -> Project:
    """Lists the sessions of ``noxfile`` with nox and makes one target per session: every
    session is a target (``-k True`` selects them all), and the project's default is
    nox's own selection (``nox --list --json``: what ``nox`` alone runs)."""
    nox = nox_command()
    every, selected = (
        _listing(noxfile, proc)
        for proc in [_start_listing(noxfile, nox, ("-k", "True")), _start_listing(noxfile, nox, ())]
    )
    lines = session_lines(noxfile)
    # nox exits 0 when it skips a session: memotest_nox.session reads its report.
    runner = (sys.executable, "-I", "-m", "memotest_nox.session", *nox)
    targets: dict[str, Target] = {}
    for entry in every + selected:
        session = entry["session"]
        name = f"nox:{session}"
        if name in targets:  # nox refuses duplicate names; be safe anyway
            continue
        targets[name] = Target(
            name=name,
            command=(*runner, "-R", "-s", session, "-f", noxfile.name),
            cwd=str(noxfile.parent),
            tags=frozenset(),
            source=SourceLocation(str(noxfile), lines.get(str(entry.get("name") or session))),
        )
    if not targets:
        raise ConfigError(f"{noxfile}: nox: no sessions (nox --list shows none)")
    settings = Settings(pass_env=(*DEFAULT_PASS_ENV, *NOX_PASS_ENV))
    project = Project(noxfile, noxfile.parent, settings, targets)
    project.default = list(dict.fromkeys(f"nox:{e['session']}" for e in selected))
    return project


def _start_listing(noxfile: Path, nox: list[str], extra: tuple[str, ...]) -> subprocess.Popen:
    try:
        return subprocess.Popen(
            [*nox, "--list", "--json", "--no-color", "-f", noxfile.name, *extra],
            cwd=noxfile.parent,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            stdin=subprocess.DEVNULL,
        )
    except OSError as exc:
        raise ConfigError(f"{noxfile}: nox: cannot run {nox[0]}: {exc.strerror}") from None


def _listing(noxfile: Path, proc: subprocess.Popen) -> list[dict]:
    try:
        stdout, stderr = proc.communicate(timeout=LIST_TIMEOUT)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise ConfigError(
            f"{noxfile}: nox: 'nox --list' did not finish in {LIST_TIMEOUT:.0f}s"
        ) from None
    if proc.returncode != 0:
        raise list_error(noxfile, proc.returncode, stdout + stderr)
    return _parse_listing(noxfile, stdout)


def _parse_listing(noxfile: Path, stdout: str) -> list[dict]:
    # The JSON is the last line; a noxfile may print while it is imported.
    for line in reversed(stdout.strip().splitlines()):
        line = line.strip()
        if line.startswith("["):
            try:
                data = json.loads(line)
            except ValueError:
                break
            if isinstance(data, list) and all(
                isinstance(d, dict) and isinstance(d.get("session"), str) for d in data
            ):
                return data
            break
    raise ConfigError(
        f"{noxfile}: nox: 'nox --list --json' printed no session list this version of "
        f"memotest understands: {stdout.strip()[-200:]!r}"
    )


_FRAME = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+)')


def list_error(noxfile: Path, code: int, output: str) -> ConfigError:
    """``nox --list`` failed: name the noxfile, the line nox's traceback points at in it
    (the innermost frame in the noxfile), and the error."""
    lines = [ln for ln in output.splitlines() if ln.strip()]
    line_no = None
    for ln in lines:
        m = _FRAME.match(ln)
        if m and _same_file(m.group("file"), noxfile):
            line_no = m.group("line")
    message = _last_error(lines) or f"nox exited with status {code}"
    where = f"{noxfile}:{line_no}" if line_no else str(noxfile)
    return ConfigError(f"{where}: nox: cannot list the sessions: {message}")


def _same_file(a: str, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def _last_error(lines: list[str]) -> str | None:
    # A traceback ends with "SomeError: message"; nox's own errors are "nox > message".
    for ln in reversed(lines):
        s = ln.strip()
        if re.match(r"^[A-Za-z_][\w.]*(Error|Exception|Exit|Interrupt)\b", s):
            return s
    for ln in reversed(lines):
        s = ln.strip()
        if s.startswith("nox >"):
            return s[len("nox >") :].strip()
    return lines[-1].strip() if lines else None


def session_lines(noxfile: Path) -> dict[str, int]:
    """Best-effort line of each session's definition (its first decorator), by function
    name and by ``@nox.session(name=...)``, for error messages. Never raises."""
    try:
        tree = ast.parse(noxfile.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, UnicodeDecodeError, ValueError):
        return {}
    out: dict[str, int] = {}
    for node in ast.walk(tree):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        line = min([d.lineno for d in node.decorator_list] + [node.lineno])
        out.setdefault(node.name, line)
        for deco in node.decorator_list:
            if isinstance(deco, ast.Call):
                for kw in deco.keywords:
                    if kw.arg == "name" and isinstance(kw.value, ast.Constant):
                        out.setdefault(str(kw.value.value), line)
    return out
