"""What a warm worker's start-up says: why it is not ready, what the paths it observed
are (kept to tell when it is stale: ``worker.py``), which of its events are memotest's."""

from __future__ import annotations

import os
import stat
from typing import Any

from memotest.model import StatSig
from memotest.tracer.log import Event

A_DIR = "dir"  # what a directory the worker looked up but did not list is (``path_sig``)


def path_sig(path: str, listed: bool = True) -> StatSig | str | None:
    """What a path is now: the file it leads to (a symbolic link's own change, to another
    file, shows as another inode), or None if it leads nowhere. A directory that was not
    listed is only a directory (``A_DIR``), as validation has it (``Kind.DIR``): the
    folders above the interpreter (``/tmp``, a home folder) change all the time."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    if not listed and stat.S_ISDIR(st.st_mode):
        return A_DIR
    return StatSig.of(st)


def own_folder_left_out(events: list[Event], folder: str) -> list[Event]:
    """The worker's events but those of its own folder (its private ``TMPDIR``, where
    ``tempfile`` writes a probe the first time it is asked for a folder, as a plugin
    preparing its runs may): memotest's, not the runs' (each would have written it)."""
    inside = os.path.join(folder, "")
    return [ev for ev in events if not (ev.fields and ev.fields[0].startswith(inside))]


def not_ready(msg: dict[str, Any] | None, err_path: str) -> tuple[str, list[tuple[str, str]]]:
    """Why a worker whose answer was ``msg`` (None: none) is not ready, and the module it
    refused to preload with why, if that is the reason (``err_path``: its stderr)."""
    errors = "; ".join(msg.get("errors", [])) if msg else ""
    refused = msg.get("refused") if msg else None
    found: list[tuple[str, str]] = []
    if not errors and isinstance(refused, list) and len(refused) == 2:
        found = [(str(refused[0]), str(refused[1]))]
        errors = f"preloading {refused[0]}: {refused[1]}"
    if not errors:
        try:
            with open(err_path, "rb") as f:
                errors = f.read()[-300:].decode("utf-8", "replace").strip()
        except OSError:
            pass
    return errors or "the worker did not start", found
