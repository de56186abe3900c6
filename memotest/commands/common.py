"""What the commands that work on targets share: -f/--from, loading, opening the store."""

from __future__ import annotations

import argparse
import sys
import time

from memotest import plugins
from memotest.config import Project
from memotest.errors import UsageError
from memotest.store import Store, StoreError, StoreLocked

LOCK_WAIT = 600.0


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
        help="load the targets with the named plugin (e.g. tox, nox, make, rules, pytest)",
    )


def load_project(args: argparse.Namespace) -> Project:
    return plugins.load_project(args)


def open_store(project: Project, *, lock: bool) -> Store:
    """Opens the project's store; a build waits (saying so) for another build's lock."""
    try:
        try:
            return Store.open(project.root, lock=lock, lock_timeout=0)
        except StoreLocked as exc:
            print(f"memotest: {exc}; waiting for it to finish...", file=sys.stderr)
            t0 = time.monotonic()
            store = Store.open(project.root, lock=lock, lock_timeout=LOCK_WAIT)
            print(f"memotest: got the lock after {time.monotonic() - t0:.1f}s", file=sys.stderr)
            return store
    except StoreLocked as exc:
        raise UsageError(str(exc)) from None
    except StoreError as exc:
        raise UsageError(f"the store in {project.root} cannot be used: {exc}") from None
