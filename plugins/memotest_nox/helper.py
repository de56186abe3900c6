"""``memoized``: skip a nox session's ``session.run`` commands while nothing they saw changed.

Usage in a noxfile::

    import nox
    from memotest_nox import memoized

    @nox.session
    @memoized
    def tests(session):
        session.install("pytest")          # runs as usual, every time
        session.run("pytest", "-q")        # memoized: replayed while its inputs hold

Granularity: **one target per ``session.run`` call** (``nox:<session>:<n>``, ``n`` counting
the session's memoized runs): each call is a process tree of its own, which the tracer can
observe, so a session with a slow test run and a fast lint run re-runs only the one whose
inputs changed; ``session.install`` is not memoized (it runs as nox decides).

The key of a run: the resolved command (argv, the program's absolute path), its cwd, the
session's environment (``session.env`` and the call's ``env=``: their names are passed and
their values hashed; ``PATH`` carries the venv's bin folder), and the venv's interpreter
and ``pyvenv.cfg`` as declared inputs; everything the command reads (including the venv's
``site-packages``) is traced, so a changed dependency re-runs it.

The command runs with the memotest environment, not all of nox's: ``memotest.toml``'s
default ``pass_env`` (PATH, HOME, LANG, LC_*, PYTHON*, ...), plus the session's variables,
plus ``memoized(pass_env=[...])``. A variable the command reads from the outer environment
must be named there (its value then becomes part of the key).

Environment switches: ``MEMOTEST_NOX=off`` runs every command normally (no memoization);
``MEMOTEST_NOX=force`` runs every memoized command and records it. Inside a traced
process (``memotest build`` running the session, ``memotest trace``) the helper steps
aside, since the outer memotest memoizes the whole session already.
"""

from __future__ import annotations

import functools
import glob
import os
import shlex
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar, overload

from memotest_pytest.walk import narrowed

from memotest.load.config import DEFAULT_PASS_ENV, Settings, default_ignore
from memotest.memo import MemoResult, run_memoized
from memotest.model import SourceLocation, Target

F = TypeVar("F", bound=Callable[..., Any])

#: Set by the tracer in every traced process: a memoized session is being traced already.
TRACED_MARKER = "MEMOTEST_SHIM"
SWITCH = "MEMOTEST_NOX"


@overload
def memoized(func: F) -> F: ...


@overload
def memoized(
    func: None = None,
    *,
    pass_env: Iterable[str] = (),
    root: str | os.PathLike[str] | None = None,
    ignore: Iterable[str] = (),
) -> Callable[[F], F]: ...


def memoized(
    func: F | None = None,
    *,
    pass_env: Iterable[str] = (),
    root: str | os.PathLike[str] | None = None,
    ignore: Iterable[str] = (),
) -> F | Callable[[F], F]:
    """Decorates a nox session function so its ``session.run`` calls are memoized.

    Put it under ``@nox.session`` (and above or below ``@nox.parametrize``)::

        @nox.session(python=["3.11", "3.12"])
        @memoized(pass_env=["DJANGO_*"])
        def tests(session): ...

    ``pass_env``: more variables (fnmatch patterns) of nox's environment to pass to the
    commands, and key them on. ``root``: the folder whose ``.memotest/`` store holds the
    records (default: the noxfile's folder). ``ignore``: more glob patterns of paths that
    are never inputs (as ``[settings] ignore`` in ``memotest.toml``).
    """

    def decorate(fn: F) -> F:
        settings_extra = (tuple(pass_env), tuple(ignore))

        @functools.wraps(fn)
        def wrapper(session: Any, *args: Any, **kwargs: Any) -> Any:
            # nox runs every session in the noxfile's folder (it chdirs there first).
            base = Path.cwd() / root if root is not None else Path.cwd()
            proxy = MemoizedSession(session, root=base.resolve(), extra=settings_extra)
            return fn(proxy, *args, **kwargs)

        return wrapper  # type: ignore[return-value]

    if func is not None:
        return decorate(func)
    return decorate


class MemoizedSession:
    """A nox ``Session`` whose ``run`` is memoized; everything else is the session's."""

    def __init__(
        self, session: Any, *, root: Path, extra: tuple[tuple[str, ...], ...] = ((), ())
    ) -> None:
        for name, value in (("_session", session), ("_root", root), ("_extra", extra)):
            object.__setattr__(self, name, value)
        object.__setattr__(self, "_count", 0)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._session, name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._session, name, value)

    def __repr__(self) -> str:
        return f"MemoizedSession({self._session!r})"

    @property
    def unmemoized(self) -> Any:
        """The plain nox session, for a command that must always run (one that needs the
        terminal, say): ``session.unmemoized.run("pytest", "--pdb")``."""
        return self._session

    def run(
        self,
        *args: str | os.PathLike[str],
        env: Mapping[str, str | None] | None = None,
        include_outer_env: bool = True,
        silent: bool = False,
        success_codes: Iterable[int] | None = None,
        log: bool = True,
        external: Any = None,
        stdout: Any = None,
        stderr: Any = subprocess.STDOUT,
        **more: Any,
    ) -> Any:
        """As ``nox.Session.run``, memoized. Falls back to the real ``session.run`` for
        what cannot be memoized: redirected ``stdout``/``stderr``, a Python callable,
        ``--install-only``, ``MEMOTEST_NOX=off``, or running inside a memotest trace."""
        session = self._session
        plain = functools.partial(
            session.run,
            *args,
            env=env,
            include_outer_env=include_outer_env,
            silent=silent,
            success_codes=success_codes,
            log=log,
            external=external,
            stdout=stdout,
            stderr=stderr,
            **more,
        )
        mode = os.environ.get(SWITCH, "").strip().lower()
        if (
            not args
            or callable(args[0])
            or (len(args) == 1 and isinstance(args[0], (list, tuple)))
            or stdout is not None
            or stderr != subprocess.STDOUT
            or mode in ("off", "0", "no", "false")
            or TRACED_MARKER in os.environ
            or _install_only(session)
        ):
            return plain()
        object.__setattr__(self, "_count", self._count + 1)
        caller = sys._getframe(1)
        where = SourceLocation(caller.f_code.co_filename, caller.f_lineno)
        return _run(
            session,
            [os.fspath(a) for a in args],
            env=env or {},
            include_outer_env=include_outer_env,
            silent=silent,
            success_codes=list(success_codes) if success_codes is not None else [0],
            log=log,
            external=external,
            name=f"nox:{session.name}:{self._count}",
            root=self._root,
            extra_pass_env=self._extra[0],
            extra_ignore=self._extra[1],
            force=mode == "force",
            where=where,
            fallback=plain,
        )


def _install_only(session: Any) -> bool:
    runner = getattr(session, "_runner", None)
    config = getattr(runner, "global_config", None)
    return bool(getattr(config, "install_only", False))


def session_environ(
    session: Any, env: Mapping[str, str | None], include_outer_env: bool
) -> dict[str, str]:
    """The environment nox would give the command (``ProcessEnv._get_env``): the session's
    variables over the call's, over nox's own environment; the venv's bin folders first
    on PATH; variables set to None removed."""
    venv = session.virtualenv
    computed: dict[str, str | None] = {**venv.env, **env}
    if include_outer_env:
        computed = {**os.environ, **computed}
    bin_paths = venv.bin_paths
    if bin_paths:
        prior = computed.get("PATH")
        computed["PATH"] = os.pathsep.join([*bin_paths, *([prior] if prior else [])])
    return {k: v for k, v in computed.items() if v is not None}


def _which(program: str, bin_paths: Sequence[str] | None, path: str | None) -> str | None:
    """As ``nox.command.which``: the venv's bin folders first, then PATH."""
    if bin_paths:
        found = shutil.which(program, path=os.pathsep.join(bin_paths))
        if found:
            return os.path.abspath(found)
    found = shutil.which(program, path=path)
    return os.path.abspath(found) if found else None


def _run(
    session: Any,
    args: list[str],
    *,
    env: Mapping[str, str | None],
    include_outer_env: bool,
    silent: bool,
    success_codes: list[int],
    log: bool,
    external: Any,
    name: str,
    root: Path,
    extra_pass_env: tuple[str, ...],
    extra_ignore: tuple[str, ...],
    force: bool,
    where: SourceLocation,
    fallback: Callable[[], Any],
) -> Any:
    from nox.command import CommandFailed
    from nox.logger import logger

    venv = session.virtualenv
    environ = session_environ(session, env, include_outer_env)
    bin_paths = venv.bin_paths
    program = _which(args[0], bin_paths, environ.get("PATH"))
    if program is None:
        return fallback()  # nox says "Program X not found" and fails the session
    full_cmd = " ".join([args[0], *(shlex.quote(a) for a in args[1:])])
    if log:
        logger.info(full_cmd)
    if (
        getattr(venv, "is_sandboxed", False)
        and args[0] not in getattr(venv, "allowed_globals", ())
        and not external
        and bin_paths
        and not any(_inside(program, p) for p in bin_paths)
    ):
        if external == "error" or _error_on_external(session):
            logger.error(
                f"Error: {args[0]} is not installed into the virtualenv, it is located at "
                f"{program}. Pass external=True into run() to explicitly allow this."
            )
            raise CommandFailed("External program disallowed.")
        if log:
            logger.warning(
                f"Warning: {args[0]} is not installed into the virtualenv, it is located at "
                f"{program}. This might cause issues! Pass external=True into run() to "
                "silence this message."
            )

    # The key: the command (a pytest one loads memotest_walk: memotest_pytest/walk.py), the
    # session's variables (names passed, values hashed), the venv's interpreter (inputs).
    argv, environ = narrowed([program, *args[1:]], environ)
    session_vars = {k for k, v in {**venv.env, **env}.items() if v is not None}
    settings = Settings(
        pass_env=tuple(dict.fromkeys((*DEFAULT_PASS_ENV, *sorted(session_vars), *extra_pass_env))),
        ignore=default_ignore() + extra_ignore,
    )
    target = Target(
        name=name,
        command=tuple(argv),
        cwd=os.getcwd(),
        inputs=_interpreter_inputs(venv, bin_paths, environ.get("PATH")),
        source=where,
    )
    try:
        sys.stdout.flush()
        result = run_memoized(
            target,
            root=root,
            settings=settings,
            environ=environ,
            force=force,
            tee=None if silent else getattr(sys.stdout, "buffer", None),
        )
    except Exception as exc:  # before the command started (memotest.drive.faults): run it, once
        logger.warning(
            f"memotest: {type(exc).__name__}: {exc}; running {args[0]} without memoization"
        )
        return fallback()
    done = _finish(result, full_cmd, silent, success_codes, log, logger, CommandFailed)
    if result.status == "skipped":  # the command said it skipped (MEMOTEST_SKIP_FILE): so
        session.skip(f"{result.name}: {result.skip_reason}")  # does the session, for nox
    return done


def _finish(
    result: MemoResult,
    full_cmd: str,
    silent: bool,
    success_codes: list[int],
    log: bool,
    logger: Any,
    failed: type[Exception],
) -> Any:
    output = _decode(result.log)
    # The output first, the notes after it, as a run (whose output streamed as it went)
    # shows them, and as the tox plugin does.
    if not silent and output and not result.streamed:
        sys.stdout.write(output)
        sys.stdout.flush()
    if result.fault and result.note:  # memotest's own failure: shown whatever the level
        logger.warning(f"memotest: {result.note}")
    if log:  # as the tox plugin: whether it ran and why, whether it will be reused
        if result.cached:
            saved = f"saved {result.duration:.1f}s"
            logger.info(f"memotest: {result.name} is up to date: cached, replayed ({saved})")
        else:
            logger.info(f"memotest: {result.name} ran: {result.reason or 'forced'}")
            if result.note and not result.fault:
                logger.info(f"memotest: {result.note}")
    code = result.exit_code
    if code is None or code not in success_codes:
        if code is None:
            logger.error(f"Command {full_cmd} did not finish ({result.status}): {output.strip()}")
            raise failed(f"memotest: {result.status}")
        suffix = ":" if (silent and output) else ""
        logger.error(f"Command {full_cmd} failed with exit code {code}{suffix}")
        if silent and output:
            logger.error(output)
        exc = failed(f"Returned code {code}")
        exc.return_code = code  # type: ignore[attr-defined]
        raise exc
    if silent:
        if output:
            logger.output(output)
        return output
    return True


def _decode(data: bytes) -> str:
    try:
        from nox.popen import decode_output

        return decode_output(data) if data else ""
    except (ImportError, UnicodeDecodeError):
        return data.decode("utf-8", "replace")


def _inside(path: str, folder: str) -> bool:
    try:
        return Path(path).is_relative_to(os.path.abspath(folder))
    except ValueError:
        return False


def _error_on_external(session: Any) -> bool:
    runner = getattr(session, "_runner", None)
    config = getattr(runner, "global_config", None)
    return bool(getattr(config, "error_on_external_run", False))


def _interpreter_inputs(venv: Any, bin_paths: Sequence[str] | None, path: str | None) -> tuple:
    found = []
    python = _which("python", bin_paths, path)
    if python:
        found.append(python)
    location = getattr(venv, "location", None)
    if isinstance(location, str):
        cfg = os.path.join(location, "pyvenv.cfg")
        if os.path.isfile(cfg):
            found.append(cfg)
    # literal paths: a declared input with [*? is a pattern (memotest/inputs/matches.py)
    return tuple(glob.escape(p) for p in found)
