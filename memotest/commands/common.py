"""What the commands that work on a targets file share: -f, loading, opening the store."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from memotest.config import Project, find_targets_file, load
from memotest.errors import UsageError
from memotest.store import Store, StoreError, StoreLocked

LOCK_WAIT = 600.0


def add_file_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "-f",
        "--file",
        metavar="FILE",
        help="the targets file (default: memotest.toml or memotest.yaml here or in a parent)",
    )


def load_project(args: argparse.Namespace) -> Project:
    path = Path(args.file) if args.file else find_targets_file(Path.cwd())
    return load(path)


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
