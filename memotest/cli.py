"""The ``memotest`` command line: parses arguments, dispatches, turns errors into exit codes.

Exit statuses: 0 success, 1 a target failed, 2 usage or configuration error,
130 interrupted. A user's mistake is one line on stderr, never a traceback.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from memotest import __version__
from memotest.commands import build, explain, graph, show, trace
from memotest.errors import UsageError
from memotest.signals import uniform_terminal_signals
from memotest.textsafe import safe_streams

COMMANDS = (build, explain, show, graph, trace)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        command = self.prog.removeprefix("memotest").strip()
        raise UsageError(f"{command}: {message}" if command else message)


def make_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="memotest",
        description="Run test targets as memoized build steps.",
    )
    parser.add_argument("--version", action="version", version=f"memotest {__version__}")
    sub = parser.add_subparsers(title="commands", metavar="COMMAND", parser_class=_Parser)
    for command in COMMANDS:
        command.add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    safe_streams()  # a path that is not UTF-8 is printed with a backslash escape
    uniform_terminal_signals()  # nohup and background jobs: not seen by the runs (nor keyed)
    try:
        parser = make_parser()  # loads the plugins, which may be wrong
        args = parser.parse_args(argv)
        if not hasattr(args, "run"):
            parser.print_help(sys.stderr)
            return 2
        return int(args.run(args))
    except UsageError as exc:
        print(f"memotest: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("memotest: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 1
