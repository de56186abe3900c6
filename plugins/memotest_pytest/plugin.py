"""memotest plugin for pytest: one target per test file, from pytest's own collection.

``memotest build --pytest [PATH ...]`` (or ``--from pytest``) asks pytest which tests it
would run (``--collect-only``, in a subprocess, in the current folder), groups them by
file, and makes one target per file::

    pytest:<path relative to the project>
        command: PYTHON -m pytest -q -p no:cacheprovider <path>    cwd: pytest's rootdir

The project is the current folder when pytest's rootdir is inside it (a ``pytest.ini``
kept in ``tests/``), else the rootdir; the store is ``.memotest/`` there. ``PYTHON`` is
the interpreter running memotest (``sys.executable``) unless ``--pytest-python`` names
another: collection and the targets use the same one, and the tests' dependencies must be
importable by it.

Every word after ``--pytest`` up to the next option is a PATH (a file or folder that must
exist); with none, pytest collects what it would collect by itself (``testpaths`` or the
current folder). Name targets *before* ``--pytest``, or after ``--``::

    memotest build --pytest tests/unit tests/integration
    memotest build pytest:tests/unit/test_io.py --pytest tests/unit
    memotest build --pytest tests -- pytest:tests/test_io.py

The loader is ``tryfirst``: when ``--pytest`` or ``--from pytest`` is given it is asked
before the ``memotest.toml`` loader (which would otherwise answer for any folder with a
targets file); without them it never answers, so it does not auto-detect.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memotest.check.select import BENIGN_OPENERS
from memotest.errors import ConfigError, UsageError
from memotest.hookspecs import hookimpl
from memotest.load.config import DEFAULT_PASS_ENV, Project, Settings
from memotest.load.plugins import Config, LoadRequest
from memotest.model import SourceLocation, Target
from memotest_pytest import collect as driver
from memotest_pytest import early, split
from memotest_pytest.collect import MARK, NARROW, ONLY
from memotest_pytest.collect_errors import collection_error, same_file

# This plugin's other hooks, each in the module of what it is about (pluggy registers
# every hook function this module holds, so importing them here registers them).
from memotest_pytest.ignore import memotest_ignore  # noqa: F401
from memotest_pytest.pinned import _config_between, conftest_folder, pinned_config
from memotest_pytest.plain import memotest_before_target  # noqa: F401
from memotest_pytest.readers import memotest_readers  # noqa: F401
from memotest_pytest.warm import memotest_warm_report, memotest_worker_modules  # noqa: F401

if TYPE_CHECKING:
    from memotest.tracer.warm.pool import WorkerPool

#: pytest's own variables change what a run does: passed to the targets and part of the key.
PYTEST_PASS_ENV = (
    "PYTEST_ADDOPTS",
    "PYTEST_PLUGINS",
    "PYTEST_DISABLE_PLUGIN_AUTOLOAD",
    "PYTEST_DEBUG",
    "MEMOTEST_PYTEST_NARROW",  # memotest_pytest.narrow's switch
)
COLLECT_TIMEOUT = 600.0
RUN_ARGS = ("-m", "pytest", "-q", "-p", "no:cacheprovider")

NARROW_ARGS = ("-p", NARROW)
_RUN_NARROW = (*RUN_ARGS, *NARROW_ARGS)


#: pytest's own code opens and stats test files and conftests (assertion rewriting,
#: collection, tracebacks), and so does ``narrow`` (is a named path there?): that shapes
#: reports, not outcomes (``memotest/check/select.py``).
for _own in ("/_pytest/", os.path.join(os.path.dirname(os.path.abspath(__file__)), "")):
    if _own not in BENIGN_OPENERS:
        BENIGN_OPENERS.append(_own)


@hookimpl
def memotest_addoption(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("pytest (memotest_pytest)")
    group.add_argument(
        "--pytest",
        nargs="*",
        metavar="PATH",
        default=None,
        help="load one target per test file from pytest's collection (of the PATHs, default: "
        "what pytest collects here); every word after --pytest up to the next option is a "
        "PATH, so name targets before it or after --",
    )
    group.add_argument(
        "--pytest-split",
        action="append",
        metavar="FILE=N",
        default=None,
        help="run the test file FILE as N targets, each a share of its tests, so that it "
        "spreads over the job slots (repeatable; its tests must not depend on each other)",
    )
    group.add_argument(
        "--pytest-python",
        metavar="PYTHON",
        default=None,
        help="the interpreter that collects and runs the tests (default: the one running memotest)",
    )


@hookimpl(tryfirst=True)
def memotest_load_targets(request: LoadRequest, config: Config) -> Project | None:
    paths = getattr(request.options, "pytest", None)
    if paths is None and request.source != "pytest":
        return None
    if request.source not in (None, "pytest"):
        raise UsageError(f"--pytest cannot be combined with --from {request.source}")
    if request.path is not None:
        raise UsageError(
            "pytest: -f does not apply (pytest finds its own configuration); "
            "name test files or folders with --pytest PATH ..."
        )
    python = getattr(request.options, "pytest_python", None) or sys.executable
    warm = not getattr(request.options, "no_warm", False)
    splits = split.parse(getattr(request.options, "pytest_split", None), request.cwd)
    pool, defer = config.worker_pool, config.building
    return load(request.cwd, list(paths or []), python, warm, pool, splits, defer)


def resolve_python(python: str) -> str:
    """The absolute path of ``python`` (a path, or a name looked up on PATH)."""
    if os.sep in python:
        path = os.path.abspath(python)
    else:
        import shutil

        found = shutil.which(python)
        if not found:
            raise UsageError(f"--pytest-python: {python!r} not found on PATH")
        path = os.path.abspath(found)
    if not (os.path.isfile(path) and os.access(path, os.X_OK)):
        raise UsageError(f"--pytest-python: {path} is not an executable file")
    return path


def load(
    cwd: Path,
    paths: list[str],
    python: str,
    warm: bool = True,
    pool: WorkerPool | None = None,
    splits: dict[str, int] | None = None,
    defer: bool = False,
) -> Project:
    """Collects ``paths`` (relative to ``cwd``) with pytest and makes one target per file
    (``splits``: N targets for a file, ``split.py``); the collection is forked from
    ``pool``'s warm workers (the build's) when there is one. With ``defer`` (a build's),
    the collection's record is finished by the build (``Project.deferred``)."""
    python = resolve_python(python)
    for p in paths:
        if not os.path.exists(os.path.join(cwd, p)):
            raise UsageError(
                f"--pytest: no such file or folder: {p!r} (every word after --pytest is a "
                "path; name targets before --pytest, or after --)"
            )
    settings = Settings(pass_env=(*DEFAULT_PASS_ENV, *PYTEST_PASS_ENV))
    modules = warm_modules() if warm else ()
    watch = None
    if modules and pool is not None and configured_workers() and python == _own_python():
        target_of = functools.partial(early.guessed_target, python, modules, _RUN_NARROW)
        watch = early.watch(pool, settings, target_of)
    deferred: list = []
    data = collect(cwd, paths, python, warm, pool, watch=watch, defer=deferred if defer else None)
    try:
        return _targets(cwd, paths, python, warm, pool, data, splits, settings, deferred)
    except BaseException:
        for finish in deferred:  # no build: the collection's record finished now
            finish(None)
        raise


def _targets(
    cwd: Path,
    paths: list[str],
    python: str,
    warm: bool,
    pool: WorkerPool | None,
    data: dict[str, Any],
    splits: dict[str, int] | None,
    settings: Settings,
    deferred: list,
) -> Project:
    """:func:`load`'s project from the collection's report ``data``."""
    modules = warm_modules() if warm else ()
    rootdir = Path(data["rootdir"])
    home = project_home(cwd, rootdir)
    if not same_file(str(rootdir), str(cwd)):
        # The targets run in the rootdir, where imports may resolve differently (python -m
        # puts the current folder on sys.path): collect again there, as they will run.
        wanted = [os.path.join(cwd, p) for p in paths] or [str(cwd)]
        data = collect(
            rootdir, [os.path.abspath(p) for p in wanted], python, warm, pool, store=home
        )
        rootdir = Path(data["rootdir"])
        cwd = rootdir
    where = " ".join(paths) if paths else str(cwd)
    code = data.get("exit")
    # A test file that cannot be collected becomes a target of its own, which fails when
    # it runs (as running every file with pytest would show); an error that is not one
    # test file's (a conftest, the configuration) stops everything, as pytest does.
    broken = set()
    for err in data.get("errors") or []:
        file = (err.get("nodeid") or "").split("::", 1)[0]
        path = rootdir / file if file else None
        if path is None or not path.is_file() or path.name.startswith("conftest"):
            raise collection_error(rootdir, cwd, [err])
        broken.add(str(path))
    if broken:
        data["files"] = {**dict.fromkeys(broken, 0), **data.get("files", {})}
        code = 0
    if code == 5 or (code == 0 and not data.get("files")):
        raise ConfigError(f"pytest: no tests collected in {where}")
    if code != 0:
        raise ConfigError(
            f"pytest: collecting {where} failed (pytest exit status {code}): "
            f"{data.get('output', '').strip()[-500:]}"
        )
    split.check(splits or {}, list(data["files"]), bool(data.get("narrow")))
    run_args = RUN_ARGS
    pin: tuple[str, ...] = ()
    if data.get("narrow"):
        run_args = (*RUN_ARGS, *NARROW_ARGS)
        pin = pinned_config(data.get("inipath"), rootdir, data.get("settings", True))
    top = Path(data["inipath"]).parent if data.get("inipath") else rootdir
    configured = bool(modules) and bool(data.get("narrow")) and configured_workers()
    targets: dict[str, Target] = {}
    seen: dict[Path, bool] = {}
    conftests: dict[Path, Path] = {}
    for file in sorted(data["files"]):
        rel = os.path.relpath(file, rootdir)
        name = f"pytest:{os.path.relpath(file, home)}"
        # pytest run on this one file would look for its configuration from the file's
        # folder up: a configuration file in between (tests/sub/pytest.ini) may be the one
        # it takes, so such a target is left to pytest's own search.
        own = () if _config_between(Path(file).parent, top, seen) else pin
        args = file_args(rel, file, bool(data.get("narrow")))
        command = (python, *run_args, *own, *args)
        # Forked from a worker that configured pytest for the files of the deepest
        # folder above with a conftest (``worker_side.prepare``, ``conftest_folder``):
        # only with the configuration pinned (the same for every file) and a file given
        # as itself (its folder's conftests).
        prepare: tuple[str, ...] = ()
        if configured and own and args == (rel,):
            folder = conftest_folder(Path(file).parent, top, conftests)
            prepare = early.prepare_args(run_args, own, early.in_folder(folder, rootdir))
        n = (splits or {}).get(os.path.normpath(file))
        for part, part_command in (split.parts(name, command, n) if n else {name: command}).items():
            targets[part] = Target(
                name=part,
                command=part_command,
                cwd=str(rootdir),
                source=SourceLocation(file),
                warm=modules,
                prepare=prepare,
            )
    project_file = Path(data["inipath"]) if data.get("inipath") else rootdir
    return Project(project_file, home, settings, targets, deferred=deferred)


def _own_python() -> str:
    return os.path.abspath(sys.executable)


def project_home(cwd: Path, rootdir: Path) -> Path:
    """The project the targets belong to (their names' base and the store's folder): the
    folder memotest runs in when pytest's rootdir is inside it (settings kept in
    ``tests/pytest.ini``), else the rootdir (memotest run in a subfolder of it)."""
    here, root = os.path.realpath(cwd), os.path.realpath(rootdir)
    return Path(cwd) if os.path.commonpath([here, root]) == here else rootdir


def file_args(rel: str, file: str, narrow: bool) -> tuple[str, ...]:
    """The arguments that make pytest run the one file ``rel``. pytest reads ``[`` and
    ``::`` in an argument as a test selection (``test_x[1].py`` is refused as "path cannot
    contain [] parametrization"): such a file is given as its folder, narrowed to the file
    by ``memotest_pytest.narrow``'s ``--memotest-only``; without that plugin it cannot be
    run alone, and loading stops naming it."""
    if "[" not in rel and "::" not in rel:
        return (rel,)
    if not narrow:
        raise ConfigError(
            f"{file}: pytest cannot run this file alone: it reads '[' and '::' in a path as "
            "a test selection (rename the file, or let the tests' interpreter import "
            "memotest_pytest)"
        )
    return (ONLY, rel, os.path.dirname(rel) or ".")


def warm_modules() -> tuple[str, ...]:
    """What a warm worker imports before forking the collection and the targets
    (``memotest/tracer/warm/``): pytest, and nothing pytest would rewrite (``warm.py``):
    those are imported by each run, as without a worker."""
    return ("pytest",)


#: The targets fork from a worker that configured pytest (``docs/adapters/pytest.md``)
#: unless ``MEMOTEST_PYTEST_CONFIGURED=0`` (or ``off``, ``no``, ``false``) is in memotest's
#: environment: each run then configures pytest itself.
CONFIGURED_SWITCH = "MEMOTEST_PYTEST_CONFIGURED"


def configured_workers() -> bool:
    """Whether targets fork from a worker that configured pytest (``worker_side.prepare``)."""
    return os.environ.get(CONFIGURED_SWITCH, "").strip().lower() not in ("0", "off", "no", "false")


def collect(
    cwd: Path,
    paths: list[str],
    python: str,
    warm: bool = True,
    pool: WorkerPool | None = None,
    store: Path | None = None,
    watch: early.Watch | None = None,
    defer: list | None = None,
) -> dict[str, Any]:
    """Runs the collection driver with ``python`` in ``cwd``; returns its JSON report
    (plus ``output``: what pytest printed).

    The collection is itself memoized (``run_memoized``, in the store of ``store``, else
    of ``cwd``): it is a
    command like any other, whose inputs are the test files, conftests and plugins it
    read, so a build where nothing changed does not pay for collecting again. ``watch``
    follows its output while it runs (``early.py``); its record is finished by what it
    appends to ``defer``, if given (``run_memoized``).
    """
    from memotest.memo import run_memoized

    if python == _own_python():
        # memotest's own interpreter imports the driver: it can be forked from the warm
        # worker that then runs the targets, which saves starting pytest once more.
        command: tuple[str, ...] = (python, "-m", driver.__name__, *paths)
        modules = warm_modules() if warm else ()
    else:
        with open(driver.__file__, encoding="utf-8") as f:
            command = (python, "-c", f.read(), *paths)
        modules = ()
    target = Target(
        name="pytest-collection:" + " ".join(paths or ["."]),
        command=command,
        cwd=str(cwd),
        timeout=COLLECT_TIMEOUT,
        warm=modules,
    )
    settings = Settings(pass_env=(*DEFAULT_PASS_ENV, *PYTEST_PASS_ENV))
    try:
        result = run_memoized(
            target, root=store or cwd, settings=settings, pool=pool, tee=watch, defer=defer
        )
    except OSError as exc:
        raise ConfigError(f"pytest: cannot run {python}: {exc.strerror}") from None
    if result.status == "timeout":
        raise ConfigError(f"pytest: collection in {cwd} did not finish in {COLLECT_TIMEOUT:.0f}s")
    text = result.log.decode("utf-8", "replace")
    lines = text.splitlines(True)  # without early.py's line, which is not pytest's output
    text = "".join(line for line in lines if not line.startswith(driver.CONFIGURED))
    head, _, report = text.rpartition("\n" + MARK)
    try:
        data = json.loads(report.splitlines()[0]) if report else None
    except (ValueError, IndexError):
        data = None

    class proc:  # what the checks below read
        returncode = result.exit_code
        stdout = head if data is not None else text
        stderr = ""

    output = (proc.stdout + proc.stderr).strip()
    if not isinstance(data, dict):
        raise ConfigError(
            f"pytest: collection with {python} in {cwd} ended without a report "
            f"(exit status {proc.returncode}): {output[-500:]}"
        )
    if data.get("error") == "import":
        raise ConfigError(
            f"pytest: {python} cannot import pytest ({data.get('message')}); install pytest "
            "there, or name the interpreter of your tests with --pytest-python"
        )
    if not data.get("rootdir"):
        raise ConfigError(
            f"pytest: collection in {cwd} failed (exit status {data.get('exit')}): {output[-500:]}"
        )
    data["output"] = output
    return data
