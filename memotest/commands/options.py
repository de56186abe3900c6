"""Options more than one command takes (imports nothing: parsers are built on every start)."""

from __future__ import annotations

import argparse


def add_file_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "-f",
        "--file",
        metavar="FILE",
        help="the targets file: memotest.toml/.yaml, or a file a plugin reads (tox.ini, "
        "noxfile.py, Makefile, BUILD); default: memotest.toml here or in a parent, else "
        "what a plugin recognises here",
    )
    p.add_argument(
        "--from",
        dest="source",
        metavar="NAME",
        help="load the targets with the named plugin (e.g. tox, nox, make, rules)",
    )
