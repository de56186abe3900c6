"""The command the tox plugin puts in place of an env's commands.

``python -m memotest_tox.exec SPEC.json`` runs with the host interpreter (where memotest is
installed) but in the environment tox gives commands, so its ``os.environ`` is exactly what
the original commands would get. It builds the env's :class:`~memotest.model.Target`,
``tox:ENV``, whose command runs the original commands through :mod:`memotest_tox.seq`, and
calls :func:`memotest.memo.run_memoized`: if the env's last record still holds, its log is
printed again and its exit code returned without running anything; otherwise the commands
run under the tracer and are recorded. The last line says which (``memotest: cached,
replayed (saved 3.2s)`` or ``memotest: ran: REASON``). The exit code is the commands', so
tox reports OK or FAIL as it would have.

The environment is part of the key, except for the variables listed in :data:`DROPPED`
(the runner replaces them) and :func:`unkeyed` (per-invocation noise, handed to the
commands unkeyed by :mod:`memotest_tox.seq`).

If memotest itself cannot do its job (a broken store, no tracer library), the commands run
without memoizing, after a warning: memotest never stands between a user and their tests.
If this process is already traced by an outer memotest (``memotest build`` running tox),
the commands run plainly too, under the outer tracer, which must see them.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

#: The adapter's name in messages.
NAME = "memotest-tox"

#: Variables that are neither passed nor keyed: the runner gives each run its own private
#: temporary folder, and the tracer sets its own variables.
DROPPED = frozenset(
    {"TMPDIR", "TMP", "TEMP", "MEMOTEST_TRACE_DIR", "MEMOTEST_SHIM", "MEMOTEST_SHIM_LIBRARY"}
)

#: Variables tox sets that change from one invocation to the next without changing what
#: the commands do: the terminal size (``COLUMNS``/``LINES``, set when tox runs in a
#: terminal) and the path of the built package, which lives in a numbered slot folder
#: (``.tox/.tmp/package/N/...``; its content reaches the commands through the install,
#: which is traced). They are passed to the commands, but are not part of the key.
UNKEYED = ("COLUMNS", "LINES", "TOX_PACKAGE")

#: Set in every process of a traced tree (the shim re-injects it into scrubbed ones).
TRACED_MARKER = "MEMOTEST_TRACE_DIR"


def unkeyed(spec: Mapping[str, Any]) -> list[str]:
    """The variables passed to the commands without being part of the key."""
    names = list(UNKEYED)
    if spec.get("random_hashseed"):
        names.append("PYTHONHASHSEED")
    return names


def glob_literal(name: str) -> str:
    """A ``pass_env`` pattern matching exactly ``name``."""
    return "".join(f"[{c}]" if c in "*?[" else c for c in name)


def pass_env(environ: Mapping[str, str], spec: Mapping[str, Any]) -> tuple[str, ...]:
    """Every variable tox gives the commands, except the dropped and unkeyed ones."""
    skip = DROPPED | set(unkeyed(spec))
    return tuple(glob_literal(k) for k in sorted(environ) if k not in skip)


def seq_spec(spec: Mapping[str, Any]) -> dict[str, Any]:
    """The argument of :mod:`memotest_tox.seq` (part of the target's definition)."""
    return {
        "env": spec["env"],
        "sets": spec["sets"],
        "ignore_errors": spec["ignore_errors"],
        "retry": spec["retry"],
    }


def target_of(spec: Mapping[str, Any]) -> Any:
    from memotest.model import SourceLocation, Target

    argument = json.dumps(seq_spec(spec), sort_keys=True, separators=(",", ":"))
    return Target(
        name=spec["target"],
        command=(
            spec["python"],
            *spec.get("python_flags", ["-I"]),
            "-m",
            "memotest_tox.seq",
            argument,
        ),
        cwd=spec["cwd"],
        scratch=tuple(spec.get("scratch", ())),
        source=SourceLocation(spec["config_file"]) if spec.get("config_file") else None,
    )


def out(text: str) -> None:
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def run_plainly(spec: Mapping[str, Any], environ: Mapping[str, str]) -> int:
    """Runs the original commands here, without memoizing."""
    from memotest_tox import seq

    sys.stdout.flush()
    return seq.run(seq_spec(spec), spec["cwd"], environ)


def memoized(spec: Mapping[str, Any], environ: dict[str, str]) -> int:
    from memotest.load.config import Settings
    from memotest.memo import run_memoized
    from memotest_tox import tox_settings

    tox_ini = Path(spec["root"]) / "tox.ini"
    settings = Settings(pass_env=pass_env(environ, spec), services=tox_settings.services(tox_ini))
    try:
        result = run_memoized(
            target_of(spec),
            root=Path(spec["root"]),
            settings=settings,
            environ=environ,
            unkeyed_env={k: environ[k] for k in unkeyed(spec) if k in environ},
            force=bool(spec.get("force")),
            tee=sys.stdout.buffer,
        )
    except KeyboardInterrupt:
        out(f"{NAME}: interrupted")
        return 130
    except Exception as exc:  # memotest failed, not the commands: run them anyway
        out(
            f"{NAME}: warning: memotest failed ({type(exc).__name__}: {exc}); running the "
            "commands without memoizing"
        )
        return run_plainly(spec, environ)
    log = result.log
    if not result.streamed:  # a replay; a run was shown as it went
        sys.stdout.buffer.write(log)
    if log and not log.endswith(b"\n"):
        sys.stdout.buffer.write(b"\n")
    sys.stdout.flush()
    if result.cached:
        out(f"memotest: cached, replayed (saved {result.duration:.1f}s)")
    else:
        out(f"memotest: ran: {result.reason}" if result.reason else "memotest: ran")
        if result.note:
            out(f"memotest: {tox_settings.reword(result.note)}")
    if result.status == "passed":
        return 0
    if result.exit_code is None or result.exit_code == 0:
        return 1
    return result.exit_code if 0 < result.exit_code < 256 else 1


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if len(argv) != 1:
        print(f"usage: python -m memotest_tox.exec SPEC.json ({NAME})", file=sys.stderr)
        return 2
    try:
        spec = json.loads(Path(argv[0]).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        print(f"{NAME}: cannot read the spec {argv[0]}: {exc}", file=sys.stderr)
        return 2
    environ = dict(os.environ)  # exactly what tox gives the commands
    if TRACED_MARKER in environ:
        out(f"{NAME}: already traced by an outer memotest: running the commands plainly")
        return run_plainly(spec, environ)
    # memotest's own settings from the host (where the shim is, its build cache); they
    # are not passed to the commands, which get only ``environ``'s variables.
    os.environ.update(spec.get("host_env", {}))
    return memoized(spec, environ)


if __name__ == "__main__":
    sys.exit(main())
