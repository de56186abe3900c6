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
from memotest.reporting.textsafe import safe_streams
from memotest.run.signals import uniform_terminal_signals

COMMANDS = (build, explain, show, graph, trace)
#: The words that name a command (``show`` adds ``list`` and ``clean``).
COMMAND_NAMES = frozenset(("build", "explain", "show", "list", "clean", "graph", "trace"))


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        command = self.prog.removeprefix("memotest").strip()
        raise UsageError(f"{command}: {message}" if command else message)


def make_parser(plugin_options: bool = True) -> argparse.ArgumentParser:
    """The command line's parser; ``plugin_options`` False leaves the plugins' options out
    of the commands' parsers, and the plugins unloaded (for a line naming no command)."""
    parser = _Parser(
        prog="memotest",
        description="Run test targets as memoized build steps.",
    )
    parser.add_argument("--version", action="version", version=f"memotest {__version__}")
    sub = parser.add_subparsers(title="commands", metavar="COMMAND", parser_class=_Parser)
    for command in COMMANDS:
        command.add_parser(sub, plugin_options)
    return parser


def names_a_command(argv: Sequence[str]) -> bool:
    """Whether a word of ``argv`` is a command's name: else (``--version``, ``--help``, a
    mistyped command) the line is answered without loading the plugins. A word that only
    looks like one (an option's value) loads them too, as every line did before."""
    return any(word in COMMAND_NAMES for word in argv)


def main(argv: Sequence[str] | None = None) -> int:
    safe_streams()  # a path that is not UTF-8 is printed with a backslash escape
    uniform_terminal_signals()  # nohup and background jobs: not seen by the runs (nor keyed)
    try:
        words = sys.argv[1:] if argv is None else list(argv)
        parser = make_parser(names_a_command(words))  # loads the plugins, which may be wrong
        args = parser.parse_args(words)
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
