"""What a creation's success saw at its path, when it would have succeeded on another
state too: the shim's ``Y`` (absent or a directory), ``Z`` (an exist_ok ``mkdir`` that
found a directory: absent or a directory of those permission bits), ``V``/``Q`` (absent
or a regular file: an ``O_CREAT`` open without ``O_EXCL``) and ``J`` (absent or not a
directory: a plain ``rename``), folded per path into ``Trace.missing_or``
(``inputs/absent.py``, ``_shim/PROTOCOL.md``, ``docs/limits.md``, "A plain creation's
success", "A folder an exist_ok mkdir found").
"""

from __future__ import annotations

import os
from collections.abc import Collection

from memotest.model import DIR_OF_BITS, ProcessInfo

#: ``Q``, an ``O_CREAT`` open that keeps a file's bytes, made the file: it ends the same
#: on a regular file where nothing reads the path (its bytes are then nobody's input, as
#: those of a file appended to, ``U``), on an empty one where anything does.
KEPT_BYTES = "file-kept"
#: The shim's records of a call whose success says "absent, or ...": what else it ends
#: the same on (``Trace.missing_or``, ``_shim/PROTOCOL.md``).
OR_STATES = {"Y": "dir", "V": "file", "Q": KEPT_BYTES, "J": "not-dir"}
#: Of the states a path may be in besides absent, each within the next (an empty regular
#: file is a regular file, which is no directory); a directory is in none of them.
_FILE_STATES = ("empty-file", "file", "not-dir")


def _narrowest(states: set[str]) -> str | None:
    """What a path seen as "absent or S" by several calls may be so that every one of them
    ends the same: the narrowest of nested states; None (absent only) for a directory and
    a file together."""
    if len(states) == 1:
        return next(iter(states))
    dirs = {s for s in states if s == "dir" or s.startswith(DIR_OF_BITS)}
    if dirs:
        # a folder and a file together: absent only; a folder of given permission bits
        # (``Z``) is a folder: those bits, where no two ``Z`` disagree
        pinned = dirs - {"dir"}
        return next(iter(pinned)) if len(dirs) == len(states) and len(pinned) == 1 else None
    return next(s for s in _FILE_STATES if s in states)


def held_as(seen_as: dict[str, set[str]], read: Collection[str]) -> dict[str, str]:
    """Each path's state besides absent that every call which saw it ends the same on
    (none where that is absent alone). ``read``: the paths the tree read, before or after
    the call: an open that kept a file's bytes (``Q``) read them there."""
    out = {}
    for path, states in seen_as.items():
        if KEPT_BYTES in states:
            states = (states - {KEPT_BYTES}) | {"empty-file" if path in read else "file"}
        state = _narrowest(states)
        if state is not None:
            out[path] = state
    return out


def mkdir_p(image: ProcessInfo | None) -> bool:
    """Whether the process is a ``mkdir -p`` that does not say what it made (no ``-v``):
    POSIX's ``-p`` ignores an operand that names an existing directory, so what it looked
    for and made it learnt only as "absent or a directory" (``inputs/absent.py``)."""
    if image is None or os.path.basename(image.exe or "") != "mkdir":
        return False
    parents, args = False, iter(image.argv[1:])
    for arg in args:
        if arg == "--":
            break
        if arg in ("--parents",):
            parents = True
        elif arg.startswith("--mode=") or arg.startswith("--context"):
            continue
        elif arg == "--mode":
            next(args, None)
        elif arg.startswith("-") and not arg.startswith("--") and len(arg) > 1:
            for i, c in enumerate(arg[1:]):
                if c == "p":
                    parents = True
                elif c == "m":
                    if i == len(arg) - 2:
                        next(args, None)  # the mode is the next word
                    break
                elif c != "Z":
                    return False  # -v, or an option not known here: held as absence
        elif arg.startswith("-"):
            return False
    return parents
