"""``memotest-sh``: a ``SHELL`` for make that memoizes the recipes of the targets you mark.

The ``memotest-sh`` make runs is a small C program (``front/``) that replays a line whose
stamp holds (:mod:`memotest_make.stamp`); for everything else it runs this module's
:func:`main` (the console script ``memotest-sh-py``), passing its context first.

make runs every recipe line as ``$(SHELL) $(.SHELLFLAGS) 'line'``. With::

    SHELL := memotest-sh
    .SHELLFLAGS = --target=$@ -c

each line of a marked target runs once under memotest's tracer and is recorded in
``.memotest/`` of make's working directory (``CURDIR``, so ``make -C dir`` uses ``dir``);
while nothing it observed changes, the next ``make`` prints the recorded log and exits with
the recorded status instead of running it. Lines of unmarked targets are handed to
``/bin/sh`` with ``exec``: they run exactly as without memotest-sh.

Command line (our options first, then the real shell's flags, then the recipe)::

    memotest-sh [--target=NAME] [--memoize='NAMES'] [--root=DIR] [--shell=PATH]
                [--pass-env='PATTERNS'] [--timeout=SECONDS] [--quiet] [--]
                SHELLFLAGS... RECIPE

Which targets are memoized: those matching ``--memoize`` (space-separated names or globs;
``%`` works like ``*``), else those in the ``MEMOTEST_TARGETS`` environment variable, else
every target. ``docs/adapters/make.md`` explains the environment a memoized line gets and
what is part of its key.

This module imports only the standard library at the top: an unmarked line costs one
interpreter start and an ``exec``.
"""

from __future__ import annotations

import fnmatch
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from memotest_make.makeflags import (
    jobserver_passed,
    line_env,
    normalize_makeflags,
    override_names,
    split_makeflags,
)

if TYPE_CHECKING:
    from memotest_make.stamping import Front

__all__ = [
    "Invocation",
    "Usage",
    "is_marked",
    "jobserver_passed",
    "line_env",
    "main",
    "normalize_makeflags",
    "override_names",
    "parse_args",
    "split_makeflags",
]

PROG = "memotest-sh"
DEFAULT_SHELL = "/bin/sh"
#: The sub-folder of ``.memotest/`` where memotest-sh keeps what each line left behind.
OUTPUTS_DIR = "make-outputs"

_VALUE_OPTIONS = ("--target", "--memoize", "--root", "--shell", "--pass-env", "--timeout")
_FLAG_OPTIONS = ("--quiet",)


class Usage(Exception):
    """A bad command line: memotest-sh exits 2 with the message."""


class Invocation:
    """A parsed ``memotest-sh`` command line. (A plain class: ``dataclasses`` would add
    to the start-up time every unmarked recipe line pays.)"""

    def __init__(self) -> None:
        self.target: str | None = None
        self.memoize: list[str] | None = None
        self.root: str | None = None
        self.shell: str = DEFAULT_SHELL
        self.pass_env: list[str] = []
        self.timeout: float | None = None
        self.quiet = False
        self.shell_flags: list[str] = []
        self.recipe = ""

    @property
    def argv(self) -> list[str]:
        """What ``/bin/sh`` (or ``--shell``) is run with."""
        return [self.shell, *self.shell_flags, self.recipe]


def parse_args(args: Sequence[str]) -> Invocation:
    """Our long options come first; the first argument that is not one of them starts the
    real shell's flags (``-c``, ``-ec``, ``-o pipefail -c``); the last argument is the
    recipe. ``--opt VALUE`` and ``--opt=VALUE`` both work; ``--target`` followed by an
    argument starting with ``-`` means no target (make expands ``$@`` to nothing for
    ``$(shell ...)`` calls)."""
    inv = Invocation()
    args = list(args)
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            i += 1
            break
        name, eq, value = arg.partition("=")
        if name in _FLAG_OPTIONS and not eq:
            inv.quiet = True
            i += 1
            continue
        if name not in _VALUE_OPTIONS:
            break
        if not eq:
            if i + 1 >= len(args):
                raise Usage(f"{name} needs a value")
            value = args[i + 1]
            if name == "--target" and value.startswith("-"):
                value = ""
                i -= 1  # the next argument belongs to the shell
            i += 2
        else:
            i += 1
        _set(inv, name, value)
    rest = args[i:]
    if not rest:
        raise Usage(
            "no recipe to run (make calls $(SHELL) $(.SHELLFLAGS) 'recipe'; "
            "set .SHELLFLAGS = --target=$@ -c)"
        )
    inv.shell_flags, inv.recipe = rest[:-1], rest[-1]
    return inv


def _set(inv: Invocation, name: str, value: str) -> None:
    if name == "--target":
        inv.target = value or None
    elif name == "--memoize":
        inv.memoize = value.split()
    elif name == "--root":
        inv.root = value or None
    elif name == "--shell":
        if not value:
            raise Usage("--shell needs a program, like --shell=/bin/bash")
        inv.shell = value
    elif name == "--pass-env":
        inv.pass_env.extend(value.split())
    elif name == "--timeout":
        try:
            inv.timeout = float(value)
        except ValueError:
            raise Usage(f"--timeout must be seconds, not {value!r}") from None
        if inv.timeout <= 0:
            raise Usage("--timeout must be seconds > 0")


def is_marked(target: str, memoize: list[str] | None, environ: Mapping[str, str]) -> bool:
    """Whether ``target``'s recipe is memoized: ``--memoize``, else ``MEMOTEST_TARGETS``
    from the environment, else every target."""
    patterns = memoize
    if patterns is None:
        value = environ.get("MEMOTEST_TARGETS")
        if value is None:
            return True
        patterns = value.split()
    return any(fnmatch.fnmatchcase(target, p.replace("%", "*")) for p in patterns)


# -- running -----------------------------------------------------------------------------------


def exec_plain(inv: Invocation) -> int:
    """Replaces this process with the real shell, as make would have run it."""
    try:
        os.execv(inv.shell, inv.argv)
    except OSError as exc:
        print(f"{PROG}: cannot run {inv.shell}: {exc.strerror}", file=sys.stderr)
        return 127
    return 127  # pragma: no cover - execv does not return


def line_name(target: str, recipe: str) -> str:
    """``make:<target>:<hash of the line>``: one record per distinct line of a target."""
    import xxhash

    return f"make:{target}:{xxhash.xxh3_64_hexdigest(os.fsencode(recipe))[:8]}"


def _extra_patterns(inv: Invocation, environ: Mapping[str, str]) -> list[str]:
    return list(inv.pass_env) + environ.get("MEMOTEST_PASS_ENV", "").split()


def memoize(inv: Invocation, environ: Mapping[str, str], front: tuple[str, str] | None) -> int:
    """Runs the line through :func:`memotest.memo.run_memoized` and reports like a shell.
    ``front``: the front's context and the line's stamp path (:mod:`memotest_make.stamp`),
    when the front ran this (then what replays or passes is stamped)."""
    assert inv.target is not None
    root = os.path.abspath(inv.root or os.getcwd())
    from memotest.load.config import DEFAULT_PASS_ENV

    patterns = list(dict.fromkeys((*DEFAULT_PASS_ENV, *_extra_patterns(inv, environ))))

    from memotest.errors import UsageError
    from memotest.load.config import Settings
    from memotest.memo import run_memoized
    from memotest.model import Target

    settings = Settings(pass_env=tuple(patterns))
    target = Target(
        name=line_name(inv.target, inv.recipe),
        command=tuple(inv.argv),
        cwd=os.getcwd(),
        env=tuple(sorted(line_env(environ).items())),
        timeout=inv.timeout,
    )
    outputs = _Outputs(Path(root), target.name)
    gone = outputs.gone()
    if gone and not inv.quiet:
        print(f"[memotest] {inv.target}: {gone}, which it made, is gone: running", file=sys.stderr)
    try:
        result = run_memoized(
            target,
            root=Path(root),
            settings=settings,
            environ=environ,
            force=bool(gone),
            tee=sys.stdout.buffer,
        )
    except UsageError as exc:
        print(f"{PROG}: {inv.target}: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # before the recipe started (memotest.drive.faults): run it, once
        print(f"{PROG}: {inv.target}: memotest failed ({exc!r}); ran plainly", file=sys.stderr)
        return exec_plain(inv)
    if not result.streamed:  # a replay; a run was shown as it went
        sys.stdout.buffer.write(result.log)
    sys.stdout.buffer.flush()
    if result.cached:
        if not inv.quiet:
            print(
                f"[memotest] {inv.target}: up to date, replayed "
                f"(the recorded run took {result.duration:.2f}s)",
                file=sys.stderr,
            )
        if front is not None:
            from memotest_make.stamping import stamp_replay

            stamp_replay(
                Path(root), target, settings, result, _front(inv, front, patterns, environ)
            )
    else:
        if result.status == "passed":
            outputs.remember()
            if not result.note and front is not None:  # recorded: the next make replays it
                from memotest_make.stamping import stamp_run

                stamp_run(
                    Path(root), target, settings, result, _front(inv, front, patterns, environ)
                )
        if result.note and (result.fault or not inv.quiet):
            print(f"[memotest] {inv.target}: {result.note}", file=sys.stderr)
    if result.status == "timeout":
        print(f"{PROG}: {inv.target}: timed out after {inv.timeout}s", file=sys.stderr)
        return 124
    if result.exit_code is None:
        print(f"{PROG}: {inv.target}: could not run the recipe", file=sys.stderr)
        return 127
    return result.exit_code


def _front(
    inv: Invocation, front: tuple[str, str], patterns: list[str], environ: Mapping[str, str]
) -> Front:
    from memotest_make.stamping import Front

    assert inv.target is not None
    outputs = _Outputs(Path(os.getcwd()), line_name(inv.target, inv.recipe))
    return Front(
        context=front[0],
        path=front[1],
        patterns=tuple(patterns),
        environ=environ,
        label=inv.target,
        outputs=tuple(outputs.listed()),
        quiet=inv.quiet,
    )


class _Outputs:
    """What a line wrote and left behind, so that a replay is refused once it is gone.

    memotest records what a command read; a make recipe usually also *makes* a file. If
    that file is deleted (``make clean``), make runs the recipe again, and replaying the
    log would not bring the file back. So after a recorded run the written paths that
    still exist are listed in ``.memotest/make-outputs/``, and if any of them is missing
    the line runs instead of being replayed.
    """

    def __init__(self, root: Path, name: str) -> None:
        import xxhash

        self.root = root
        self.name = name
        digest = xxhash.xxh3_64_hexdigest(os.fsencode(name))
        self.path = root / ".memotest" / OUTPUTS_DIR / f"{digest}.json"

    def listed(self) -> list[str]:
        """The files the last recorded run left behind."""
        import json

        try:
            data = json.loads(self.path.read_text())
        except (OSError, ValueError):
            return []
        outputs = data.get("outputs", []) if isinstance(data, dict) else []
        return [str(p) for p in outputs]

    def gone(self) -> str | None:
        """The first file the last recorded run left behind that no longer exists."""
        return next((p for p in self.listed() if not os.path.lexists(p)), None)

    def remember(self) -> None:
        import contextlib
        import json

        from memotest.store import Store, StoreError

        try:
            with Store.open(self.root, lock=False) as store:
                rec = store.get(self.name)
        except (StoreError, OSError):
            return
        if rec is None:
            return
        kept = sorted(p for p in rec.writes if os.path.lexists(p))
        with contextlib.suppress(OSError):
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(json.dumps({"name": self.name, "outputs": kept}))
            os.replace(tmp, self.path)


#: What the front (``memotest-sh``, ``front/front.c``) puts before make's arguments.
_FRONT_CONTEXT = "--front-context="
_FRONT_STAMP = "--front-stamp="


def main(argv: Sequence[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else list(argv)
    front = None
    if len(args) >= 2 and args[0].startswith(_FRONT_CONTEXT) and args[1].startswith(_FRONT_STAMP):
        front = (args[0].removeprefix(_FRONT_CONTEXT), args[1].removeprefix(_FRONT_STAMP))
        args = args[2:]
    try:
        inv = parse_args(args)
    except Usage as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return 2
    environ = os.environ
    if (
        inv.target is None
        or "MEMOTEST_TRACE_DIR" in environ  # already inside a memoized command
        or not is_marked(inv.target, inv.memoize, environ)
        or jobserver_passed(environ)
    ):
        return exec_plain(inv)
    # The environment as make passed it, before memotest's run may touch this process's.
    return memoize(inv, dict(environ), front if inv.root is None else None)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
