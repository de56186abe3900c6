"""The ``memotest`` plugin of the tox adapter (entry point ``tox`` in group ``memotest``).

Two jobs:

1. **Installation churn is not an input** (:func:`memotest_readers`). tox re-installs
   a project into its env on every run (``pip install --force-reinstall``). The installed
   files come out content-identical, except two: the distribution's ``direct_url.json``
   records the URL of the package tox just built, in a per-run numbered staging folder
   (``.tox/.tmp/package/3/demo-0.1.tar.gz``), and the sha256 of that archive, which differs
   on every build because an sdist's gzip header holds the build time; and ``RECORD``,
   which holds the hash of ``direct_url.json``. Anything that lists installed
   distributions' files (pytest does, for plugins) reads them. Their fingerprints leave
   the noise out: the slot number and the archive hash in ``direct_url.json``, the
   ``direct_url.json`` line in ``RECORD``. Everything else in them still counts, and the
   installed files themselves are fingerprinted as usual, so a changed dependency or
   changed project code still re-runs the commands. They are readers without callers
   (``memotest/inputs/readers.py``): such a file is a ``section`` input whoever read it.

2. **Loading tox envs as targets** (:func:`memotest_load_targets`): ``memotest build
   --from tox`` (or ``-f tox.ini``) makes one target per env of ``env_list``, named like
   the env, running ``python -m tox -c FILE -e NAME --no-memotest`` in the config file's
   folder, with the env's ``depends`` (among listed envs) as ``needs``. The whole tox run
   is traced: an env that installs packages talks to the network and deletes files it did
   not create, so it is never cached this way (the reason is shown); ``skip_install``
   envs are. For installing envs prefer plain ``tox``, which memoizes the commands only.
   A config file tox cannot read is a configuration error naming the file and the line
   (exit 2); nothing runs.
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memotest.errors import ConfigError
from memotest.hookspecs import hookimpl
from memotest.inputs.readers import UNPARSED, Reader, part_digest
from memotest.lazy import lazy_module
from memotest.load.config import Project, Settings
from memotest.load.plugins import LoadRequest
from memotest.model import SourceLocation, Target
from memotest.reporting.report import TargetResult
from memotest_tox import tox_settings
from memotest_tox.list_envs import MARK as LIST_MARK

if TYPE_CHECKING:
    import subprocess
else:  # every command loads this plugin; tox is only started where there is a tox.ini
    subprocess = lazy_module("subprocess")

NAME = "tox"
#: tox's per-run numbered package staging folder, in a ``direct_url.json`` URL.
STAGING = re.compile(r"/\.tmp/package/\d+/")
CONFIG_NAMES = ("tox.ini", "tox.toml")
RUN_ENV = (sys.executable, "-I", "-m", "memotest_tox.run_env")
LIST_TIMEOUT = 120.0


# -- 1. installation churn ------------------------------------------------------------


def _staged_url(direct_url: dict[str, Any]) -> bool:
    url = direct_url.get("url")
    return isinstance(url, str) and STAGING.search(url) is not None


def _read_direct_url(path: str) -> dict[str, Any] | None:
    try:
        with open(path, "rb") as f:
            data = json.loads(f.read())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _noise_free(data: bytes, path: str) -> str:
    """The digest of ``direct_url.json`` or ``RECORD`` of a distribution tox installed
    from its staging folder, without the per-run noise; UNPARSED for any other such file
    (it then stays whole)."""
    parent, _, name = path.rpartition("/")
    if not parent.endswith(".dist-info"):
        return UNPARSED
    direct = _read_direct_url(f"{parent}/direct_url.json")
    if direct is None or not _staged_url(direct):
        return UNPARSED
    if name == "direct_url.json":
        direct["url"] = STAGING.sub("/.tmp/package/N/", direct["url"])
        archive = direct.get("archive_info")
        if isinstance(archive, dict):
            archive.pop("hash", None)
            archive.pop("hashes", None)
        body = json.dumps(direct, sort_keys=True).encode()
    else:
        mark = os.fsencode(os.path.basename(parent)) + b"/direct_url.json,"
        lines = data.splitlines(keepends=True)
        body = b"".join(mark + b",\n" if line.startswith(mark) else line for line in lines)
    return part_digest(READER_NAME, body)


READER_NAME = "memotest-tox-1"
#: Read by whoever lists installed distributions' files: no callers.
READERS = [
    Reader(
        name=READER_NAME,
        match=name,
        callers=(),
        digest=_noise_free,
        holds_by="its content less tox's per-run staging noise",
        unparsed="is no longer a file of a distribution tox installed from its staging folder",
    )
    for name in ("direct_url.json", "RECORD")
]


@hookimpl
def memotest_readers() -> list[Reader]:
    return READERS


# -- 2. tox envs as targets -----------------------------------------------------------


def _is_tox_file(path: Path) -> bool:
    return path.name in CONFIG_NAMES


@hookimpl
def memotest_load_targets(request: LoadRequest) -> Project | None:
    if request.source not in (None, NAME):
        return None
    if request.path is None:
        if request.source != NAME:
            return None  # no auto-detection: a tox.ini alone does not make a memotest project
        # tox finds its configuration as `tox` does here (every format it reads).
        listed = list_envs(None, request.cwd)
        path = Path(str(listed.get("config") or ""))
        if not path.is_absolute() or not path.is_file():
            raise ConfigError(
                f"{NAME}: no tox configuration in {request.cwd} or any parent folder "
                "(tox.ini, setup.cfg, pyproject.toml [tool.tox], tox.toml)"
            )
    elif request.source == NAME or _is_tox_file(request.path):
        path = request.path.resolve()
        if not path.is_file():
            raise ConfigError(f"{NAME}: {path}: no such file")
        listed = list_envs(path, path.parent)
    else:
        return None
    root = Path(listed.get("root") or path.parent)
    targets: dict[str, Target] = {}
    envs = listed["envs"]
    text = _text(path)
    for env in envs:
        depends = [d for d in listed.get("depends", {}).get(env, []) if d in envs and d != env]
        targets[env] = Target(
            name=env,
            # run_env tells memotest when tox skipped the env (it exits 0 then too).
            command=(
                *RUN_ENV,
                sys.executable,
                "-m",
                "tox",
                "-c",
                str(path),
                "-e",
                env,
                "--no-memotest",
            ),
            cwd=str(path.parent),
            needs=tuple(depends),
            source=SourceLocation(str(path), _env_line(text, env)),
        )
    if not targets:
        raise ConfigError(f"{NAME}: {path}: env_list names no environment (add env_list = ...)")
    settings = Settings(services=tox_settings.services(path))
    return Project(path, root if root.is_dir() else path.parent, settings, targets)


@hookimpl(tryfirst=True)
def memotest_after_target(target: Target, result: TargetResult) -> None:
    """Before the reporters: a note on a tox env names the setting in tox.ini's words."""
    if target.source is not None and Path(target.source.file).name == "tox.ini":
        result.note = tox_settings.reword(result.note)


def _text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def _env_line(text: str, env: str) -> int | None:
    """The line of the env's own section (``[testenv:NAME]``, ``[env.NAME]``), if any."""
    pattern = re.compile(
        r"^\s*\[\s*(?:testenv:" + re.escape(env) + r"|env\.\"?" + re.escape(env) + r"\"?)\s*\]",
        re.M,
    )
    m = pattern.search(text)
    return text.count("\n", 0, m.start()) + 1 if m else None


def list_envs(path: Path | None, cwd: Path) -> dict[str, Any]:
    """The env list of a tox config file (None: the one tox finds from ``cwd``), read by
    tox itself in a separate process (so tox's logging setup stays out of memotest's).
    Raises :class:`ConfigError` naming the file and, where tox says it, the line."""
    where = path or cwd
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "memotest_tox.list_envs", *([str(path)] if path else [])],
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=LIST_TIMEOUT,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ConfigError(f"{NAME}: {where}: could not run tox to read it: {exc}") from None
    _, sep, payload = proc.stdout.rpartition(LIST_MARK)
    try:
        data = json.loads(payload) if sep else None
    except ValueError:
        data = None
    if not isinstance(data, dict):
        detail = (proc.stderr.strip() or proc.stdout.strip()).splitlines()
        raise ConfigError(
            f"{NAME}: {where}: tox could not read it" + (f": {detail[-1]}" if detail else "")
        )
    if "error" in data:
        raise ConfigError(_config_message(where, str(data["error"])))
    return data


def _config_message(path: Path, error: str) -> str:
    """``tox: FILE:LINE: what tox said`` from one of tox's config errors."""
    m = re.search(r"\[line\s+(\d+)\]", error) or re.search(r"line (\d+)", error)
    where = f"{path}:{m.group(1)}" if m else str(path)
    text = error.split("| ", 1)[-1]
    text = re.sub(r"^\w+: ", "", text)  # the exception's class name
    text = text.replace(f"'{path}'", "").replace(str(path), "").replace("\n\t", " ")
    text = re.sub(r"\s+", " ", text.replace("\\n'", "'")).strip(" :")
    return f"{NAME}: {where}: cannot read the tox configuration: {text}"
