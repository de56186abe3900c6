"""What the commands that work on targets share: -f/--from, loading or finding records,
opening the store."""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from memotest.commands.options import add_file_option
from memotest.errors import ConfigError, UsageError
from memotest.load import plugins
from memotest.load.config import Project, Settings, load_project
from memotest.store import STORE_DIR, Record, Store, StoreDamaged, StoreError, StoreLocked
from memotest.world.roots import of as roots_of

LOCK_WAIT = 600.0

T = TypeVar("T")
__all__ = ["add_file_option"]  # also here, where it was first


def open_store(project: Project, *, lock: bool) -> Store:
    """Opens the project's store; a build waits (saying so) for another build's lock.

    With ``lock`` a damaged store is set aside and made anew; without it, it raises
    :class:`~memotest.store.StoreDamaged` (a usage error: exit 2, saying how to fix it),
    as does any later read of a damaged part."""
    roots = roots_of(project.root, project.settings.roots)
    return _with_lock(
        lambda timeout: Store.open(project.root, lock=lock, lock_timeout=timeout, roots=roots)
    )


def wipe_store(project: Project) -> None:
    """Deletes the project's store, whatever is there (``memotest clean``), waiting (saying
    so) for another build's lock."""
    _with_lock(lambda timeout: Store.wipe(project.root, lock_timeout=timeout))


def _with_lock(call: Callable[[float], T]) -> T:
    try:
        try:
            return call(0)
        except StoreLocked as exc:
            print(f"memotest: {exc}; waiting for it to finish...", file=sys.stderr)
            t0 = time.monotonic()
            done = call(LOCK_WAIT)
            print(f"memotest: got the lock after {time.monotonic() - t0:.1f}s", file=sys.stderr)
            return done
    except StoreDamaged:
        raise
    except StoreLocked as exc:
        raise UsageError(str(exc)) from None
    except (StoreError, OSError) as exc:
        raise UsageError(f"the store {STORE_DIR}/ cannot be used: {exc}") from None


class Recorded:
    """Records that no targets file defines, found by name in the store at or above the
    current folder: what the tox plugin (``tox:ENV``), the make shell (``make:...``) and
    the nox helper (``nox:...``) record. ``show``, ``explain`` and ``list`` fall back to
    them when there is no targets file or it has no target of that name."""

    def __init__(self, root: Path, records: dict[str, Record]) -> None:
        self.root = root
        self.records = records
        self.project = Project(root / "memotest.toml", root, Settings(), {})

    @classmethod
    def find(cls, args: argparse.Namespace, names: list[str] | None) -> Recorded | None:
        """The records named ``names`` (every record: None) when they all exist and the
        command named no ``-f``/``--from``; else None (the caller reports its own error)."""
        if getattr(args, "file", None) or getattr(args, "source", None):
            return None
        here = Path.cwd()
        for folder in (here, *here.parents):
            if (folder / STORE_DIR / "db.sqlite").is_file():
                break
        else:
            return None
        try:
            with Store.open(folder, lock=False) as store:
                records = last_used(store, names)
        except StoreError:
            return None
        if not records or (names is not None and set(names) - set(records)):
            return None
        return cls(folder, records)

    def note(self) -> str:
        return f"(a record in {self.root / STORE_DIR}, made outside a targets file)"


def load_or_recorded(
    config: plugins.Config, names: list[str] | None
) -> tuple[Project | None, Recorded | None]:
    """The project, or, when there is none or it does not define the names, the store's
    records of those names (:class:`Recorded`). Raises the project's error otherwise."""
    try:
        project = load_project(config)
        if names:
            from memotest.loop.build import select

            select(project, names)
        return project, None
    except (ConfigError, UsageError):
        recorded = Recorded.find(config.options, names)
        if recorded is None:
            raise
        return None, recorded


def targets_after_pytest(args: argparse.Namespace, targets: list[str], command: str) -> list[str]:
    """The targets of ``explain``/``show``, with those written after ``--pytest PATH...``
    (which takes every word up to the next option) taken back: a word that is no existing
    path and names a target (``pytest:...``, or any word when no target was named before
    ``--pytest``). No target at all is a usage error saying what to type."""
    paths = getattr(args, "pytest", None)
    if paths:
        moved = [w for w in paths if not os.path.exists(w) and (":" in w or not targets)]
        if moved:
            args.pytest = [w for w in paths if w not in moved]
            targets = [*targets, *moved]
    if not targets:
        raise UsageError(
            f"{command} needs a TARGET: memotest {command} TARGET [--pytest PATH...] "
            f"(for example: memotest {command} pytest:tests/test_a.py --pytest tests)"
        )
    return targets


def last_used(store: Store, names: list[str] | None) -> dict[str, Record]:
    """Each target's run that decided last (replayed or recorded most recently: after a
    failing edit and its revert, the older pass that was replayed, not the newer fail),
    as ``show`` and ``list`` report it and ``explain`` reasons from it."""
    wanted = store.names() if names is None else names
    heads = store.variant_heads(wanted)
    ids = {
        name: max(hs, key=lambda h: (h.last_used_ns, h.id)).id for name, hs in heads.items() if hs
    }
    found = store.variants(ids.values())
    return {name: found[i] for name, i in ids.items() if i in found}
