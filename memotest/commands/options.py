"""Options more than one command takes (imports nothing: parsers are built on every start)."""

from __future__ import annotations

import argparse


def add_plugin_options(p: argparse.ArgumentParser, load: bool) -> None:
    """The plugins' options of a command's parser (``memotest_addoption``); with ``load``
    False (no command was named: ``--version``, ``--help``), no plugin is loaded or asked."""
    if load:
        from memotest.load import plugins

        plugins.call("memotest_addoption", parser=p, pluginmanager=plugins.manager())


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
