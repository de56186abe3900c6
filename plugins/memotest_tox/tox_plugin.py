"""The tox 4 plugin: memoize each env's commands (entry point ``memotest`` in group ``tox``).

tox has no hook that replaces running commands, so the plugin swaps them. In
``tox_before_run_commands`` it reads the env's ``commands_pre``, ``commands`` and
``commands_post`` (already substituted: posargs, ``{envpython}``, ...), checks them against
``allowlist_externals`` as tox would, writes a spec file and puts ONE command in their
place::

    HOST_PYTHON -I -m memotest_tox.exec /tmp/memotest-tox-XXXX.json

(see :mod:`memotest_tox.exec`), with ``commands_retry`` set to 0 (retries happen inside) and
the host interpreter allowed as an external. ``tox_after_run_commands`` puts everything back
and removes the spec. The three sets are memoized together, as one unit: on a hit none of
them runs, so a ``commands_post`` that reads what ``commands`` wrote (``coverage report``)
never sees a half-replayed env.

Opting out: ``memotest = false`` in an env's section, ``--no-memotest`` for a whole run,
``--memotest-force`` to run (and record again) even when the last result holds. Interactive
runs (``tox -i``/``--no-capture``, ``tox exec``) are not memoized, and neither is tox when an
outer memotest already traces it (the outer tracer must see the commands).

The random ``PYTHONHASHSEED`` tox makes up for each run is recognised here (no
``--hashseed``, no ``PYTHONHASHSEED`` in tox's own environment, not overridden by
``set_env``) and marked unkeyed; a seed that was chosen stays part of the key.
"""

from __future__ import annotations

import contextlib
import fnmatch
import glob
import json
import logging
import os
import re
import shlex
import shutil
import site
import sys
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tox.config.types import Command
from tox.plugin import impl
from tox.tox_env.errors import Fail

if TYPE_CHECKING:
    from tox.config.cli.parser import ToxParser
    from tox.config.sets import EnvConfigSet
    from tox.execute import Outcome
    from tox.session.state import State
    from tox.tox_env.api import ToxEnv

LOGGER = logging.getLogger(__name__)

#: The adapter's name in messages.
NAME = "memotest-tox"

#: The env setting that turns memoization off for one env.
ENV_KEY = "memotest"
SETS = ("commands_pre", "commands", "commands_post")
#: Settings the swap changes (and the after hook restores).
SWAPPED = (*SETS, "commands_retry", "allowlist_externals")
_STATE_ATTR = "_memotest_tox_swap"
#: Host variables memotest itself reads (never passed to the commands).
HOST_ENV_PREFIXES = ("MEMOTEST_",)
HOST_ENV_NAMES = ("XDG_CACHE_HOME",)
TRACED_MARKER = "MEMOTEST_TRACE_DIR"


@impl
def tox_add_option(parser: ToxParser) -> None:
    parser.add_argument(
        "--memotest-force",
        action="store_true",
        default=False,
        dest="memotest_force",
        help="memotest: run every env's commands even if their last result still holds, "
        "and record them again",
    )
    parser.add_argument(
        "--no-memotest",
        action="store_true",
        default=False,
        dest="no_memotest",
        help="memotest: run the commands as tox does, without memoizing them",
    )


@impl
def tox_add_env_config(env_conf: EnvConfigSet, state: State) -> None:
    env_conf.add_config(
        keys=[ENV_KEY],
        of_type=bool,
        default=True,
        desc="memoize this env's commands with memotest: skip them and replay their last "
        "log while nothing they read changed",
    )


@impl
def tox_before_run_commands(tox_env: ToxEnv) -> None:
    if not _enabled(tox_env):
        return
    sets = {key: [_command(c) for c in tox_env.conf[key]] for key in SETS}
    if not any(sets.values()):
        return
    env_vars = tox_env.environment_variables
    cwd = Path(tox_env.conf["change_dir"])
    _check_allowed(tox_env, [c for key in SETS for c in tox_env.conf[key]], env_vars, cwd)
    config_file = _config_file(tox_env)
    spec = {
        "version": 1,
        "env": tox_env.name,
        "target": f"tox:{tox_env.name}",
        "root": str(config_file.parent if config_file else Path(tox_env.core["tox_root"])),
        "config_file": str(config_file) if config_file else None,
        "cwd": str(cwd),
        "python": sys.executable,
        "python_flags": python_flags(),
        "sets": sets,
        # tox empties it before the commands: the run's own workspace (memotest/run/scratch.py)
        "scratch": [str(Path(tox_env.conf["env_tmp_dir"]).absolute())],
        "ignore_errors": bool(tox_env.conf["ignore_errors"]),
        "retry": int(_get(tox_env, "commands_retry", 0) or 0),
        "random_hashseed": _random_hashseed(tox_env, env_vars),
        "force": bool(getattr(tox_env.options, "memotest_force", False)),
        "host_env": {
            k: v
            for k, v in os.environ.items()
            if k.startswith(HOST_ENV_PREFIXES) or k in HOST_ENV_NAMES
        },
    }
    fd, spec_path = tempfile.mkstemp(prefix=f"memotest-tox-{_safe(tox_env.name)}-", suffix=".json")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump(spec, f)
    saved = {key: _get(tox_env, key, None) for key in SWAPPED}
    setattr(tox_env, _STATE_ATTR, (saved, spec_path))
    allow = list(saved["allowlist_externals"] or [])
    _overwrite(tox_env, "commands_pre", [])
    exec_cmd = [sys.executable, *python_flags(), "-m", "memotest_tox.exec", spec_path]
    _overwrite(tox_env, "commands", [Command(exec_cmd)])
    _overwrite(tox_env, "commands_post", [])
    if saved["commands_retry"] is not None:
        _overwrite(tox_env, "commands_retry", 0)
    _overwrite(tox_env, "allowlist_externals", [*allow, glob.escape(sys.executable)])


@impl
def tox_after_run_commands(tox_env: ToxEnv, exit_code: int, outcomes: list[Outcome]) -> None:
    state = getattr(tox_env, _STATE_ATTR, None)
    if state is None:
        return
    saved, spec_path = state
    delattr(tox_env, _STATE_ATTR)
    for key, value in saved.items():
        if value is not None:
            _overwrite(tox_env, key, value)
    with contextlib.suppress(OSError):
        os.unlink(spec_path)


def python_flags() -> list[str]:
    """Interpreter flags for the host Python running memotest's helpers in tox's command
    environment: isolated (``-I``), so that neither the env's ``PYTHONPATH`` nor a
    ``memotest`` folder in ``change_dir`` shadows the installed memotest; without the
    user-site part of it when memotest is installed there (``pip install --user``)."""
    user = site.getusersitepackages() if site.ENABLE_USER_SITE else None
    if user and Path(__file__).resolve().is_relative_to(Path(user).resolve()):
        return ["-E", "-P"] if sys.version_info >= (3, 11) else ["-E"]
    return ["-I"]


def _enabled(tox_env: ToxEnv) -> bool:
    options = tox_env.options
    if getattr(options, "no_memotest", False) or getattr(options, "no_capture", False):
        return False
    if TRACED_MARKER in os.environ:
        LOGGER.info("%s: tox runs under memotest's tracer: commands are not memoized", NAME)
        return False
    try:
        return bool(tox_env.conf[ENV_KEY])
    except Exception as exc:  # a value tox cannot read as a boolean
        path = _config_file(tox_env)
        line = _setting_line(path, tox_env.name, ENV_KEY) if path else None
        where = f"{path}:{line}" if line else str(path or "the tox configuration")
        raise Fail(
            f"{NAME}: {where}: [testenv:{tox_env.name}] {ENV_KEY}: {exc} "
            "(use memotest = true or memotest = false)"
        ) from None


def _command(cmd: Command) -> dict[str, Any]:
    args = [str(a) for a in cmd.args]
    return {
        "args": args,
        "ignore_exit_code": bool(cmd.ignore_exit_code),
        "invert_exit_code": bool(getattr(cmd, "invert_exit_code", False)),
        "show": _shown(args),
    }


def _shown(args: list[str]) -> str:
    """The command as tox prints it, secrets masked."""
    try:
        from tox.util.redact import redact_argv
    except ImportError:  # older tox 4
        return shlex.join(args)
    return shlex.join(redact_argv(args))


def _check_allowed(
    tox_env: ToxEnv, commands: Iterable[Command], env_vars: dict[str, str], cwd: Path
) -> None:
    """Fails the env, as tox would when it got to it, if a command runs an executable that
    is neither in the env nor in ``allowlist_externals``."""
    allow = getattr(tox_env, "_allow_externals", None)
    if allow is None or "*" in allow:
        return
    path = os.pathsep.join(str(cwd / p) for p in env_vars.get("PATH", "").split(os.pathsep))
    for cmd in commands:
        if not cmd.args:
            continue
        base = str(cmd.args[0])
        lookup = str(cwd / base) if os.sep in base else base
        exe = shutil.which(lookup, path=path)
        if exe is None:
            continue  # fails when run, with tox's message
        if any(fnmatch.fnmatch(base, a) or fnmatch.fnmatch(exe, a) for a in allow):
            continue
        what = f"{base} (resolves to {exe})" if base == exe else base
        raise Fail(f"{what} is not allowed, use allowlist_externals to allow it")


def _random_hashseed(tox_env: ToxEnv, env_vars: dict[str, str]) -> bool:
    """Whether the env's ``PYTHONHASHSEED`` is the random one tox made up for this run."""
    seed = getattr(tox_env.options, "hash_seed", None)
    if seed is None or env_vars.get("PYTHONHASHSEED") != str(seed):
        return False  # ``--hashseed notset``, or set by set_env: a chosen value
    if os.environ.get("PYTHONHASHSEED", "") not in ("", "random"):
        return False  # tox took it from its own environment
    if any(k in os.environ for k in ("TOX_HASHSEED", "TOXHASHSEED")):
        return False
    return not any(a == "--hashseed" or a.startswith("--hashseed=") for a in sys.argv)


def _config_file(tox_env: ToxEnv) -> Path | None:
    try:
        path = tox_env.core["config_file_path"]
    except Exception:
        return None
    return Path(path).resolve() if path else None


def _setting_line(path: Path, env: str, key: str) -> int | None:
    """The line setting ``key`` for ``env`` in a tox.ini or tox.toml, if it can be found:
    in the env's own section first, then in the sections every env inherits."""
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return None
    header = re.compile(r"^\s*\[\s*([^\]]+?)\s*\]")
    setting = re.compile(r"^\s*" + re.escape(key) + r"\s*=")
    found: dict[str, int] = {}
    section = ""
    for no, text in enumerate(lines, 1):
        m = header.match(text)
        if m:
            section = m.group(1).replace('"', "").replace("'", "")
        elif setting.match(text):
            found.setdefault(section, no)
    own = (f"testenv:{env}", f"env.{env}", f"tool.tox.env.{env}")
    base = ("testenv", "env_run_base", "tool.tox.env_run_base")
    for name in (*own, *base):
        if name in found:
            return found[name]
    return min(found.values()) if found else None


def _get(tox_env: ToxEnv, key: str, default: Any) -> Any:
    try:
        return tox_env.conf[key]
    except KeyError:
        return default


def _overwrite(tox_env: ToxEnv, key: str, value: Any) -> None:
    tox_env.conf._defined[key].overwrite(value)  # as tox itself does for "package"


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "._-" else "_" for c in name)[:40]
