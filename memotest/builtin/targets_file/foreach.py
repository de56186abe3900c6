"""``foreach``: one target per file matching a glob, the file's path in the command.

A target ``t`` with ``foreach = "tests/test_*.py"`` stands for targets ``t:tests/test_a.py``,
... (the group ``t``); ``{path}`` in the command is the matching file's path relative to the
targets file, shell-quoted in a command string, as is in a command list.
"""

from __future__ import annotations

import glob
import shlex

PLACEHOLDER = "{path}"


def has_placeholder(command: str | list[str]) -> bool:
    parts = [command] if isinstance(command, str) else command
    return any(PLACEHOLDER in c for c in parts)


def expand(command: str | list[str], pattern: str, root: str) -> dict[str, str | tuple[str, ...]]:
    """Each file matching ``pattern`` below ``root`` (sorted) -> its command."""
    commands: dict[str, str | tuple[str, ...]] = {}
    for rel in sorted(glob.glob(pattern, root_dir=root, recursive=True)):
        if isinstance(command, str):
            commands[rel] = command.replace(PLACEHOLDER, shlex.quote(rel))
        else:
            commands[rel] = tuple(c.replace(PLACEHOLDER, rel) for c in command)
    return commands
