"""``memotest trace [-o FILE] -- CMD [ARG...]``: what a command touched, as JSON."""

from __future__ import annotations

import argparse
import os
import shutil
import sys

from memotest.errors import UsageError


def add_parser(sub: argparse._SubParsersAction, plugin_options: bool = True) -> None:
    p = sub.add_parser(
        "trace",
        help="run a command under the tracer and print what it touched as JSON",
        description="Run CMD under the tracer and write one JSON object describing every "
        "file its process tree read, wrote, stat'ed, listed, executed or looked for. "
        "Without -o the JSON goes to stdout and the command's own stdout to stderr. "
        "The command's exit status is passed through.",
        usage="memotest trace [-o FILE] -- CMD [ARG...]",
    )
    p.add_argument("-o", "--output", metavar="FILE", help="write the JSON to FILE")
    p.add_argument("command", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    import json

    from memotest.tracer.run import TracedRun  # only here: every start builds this parser

    command = list(args.command)
    if command and command[0] == "--":
        command = command[1:]
    if not command:
        raise UsageError(
            "trace: no command given (usage: memotest trace [-o FILE] -- CMD [ARG...])"
        )
    _check_runnable(command[0])
    out = None
    if args.output:
        try:
            out = open(args.output, "w", encoding="utf-8")  # noqa: SIM115 (closed below)
        except OSError as exc:
            raise UsageError(f"trace: cannot write {args.output}: {exc.strerror}") from None
    try:
        stdout = None if out else sys.stderr.fileno()
        with TracedRun(command, stdout=stdout, stdin=None, new_session=False) as traced:
            try:
                traced.start()
            except OSError as exc:
                raise UsageError(f"trace: cannot run {command[0]}: {exc.strerror}") from None
            try:
                trace = traced.finish()
            except KeyboardInterrupt:
                traced.kill()
                return 130
        text = json.dumps(trace.as_json(), indent=2)
        if out:
            out.write(text + "\n")
        else:
            sys.stdout.write(text + "\n")
            sys.stdout.flush()
    finally:
        if out:
            out.close()
    code = trace.exit_code
    return 128 - code if code < 0 else code


def _check_runnable(prog: str) -> None:
    if "/" in prog:
        if not os.path.exists(prog):
            raise UsageError(f"trace: command not found: {prog}")
        if os.path.isdir(prog) or not os.access(prog, os.X_OK):
            raise UsageError(f"trace: not an executable file: {prog}")
    elif shutil.which(prog) is None:
        raise UsageError(f"trace: command not found: {prog}")
