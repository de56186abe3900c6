"""What of make's environment a memoized line gets and is keyed by: ``MAKEFLAGS`` without
the flags that cannot change what it does, and the variables set on make's command line."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

#: Flags that only say how many jobs make runs at once or how it groups their output.
#: A memoized line runs without make's jobserver (its file descriptors are not passed),
#: so they cannot change what it does.
_IGNORED_FLAG = re.compile(
    r"^(-j\d*|--jobs(=\d+)?|--jobserver-(auth|fds)=.*|-O\w*|--output-sync(=\w+)?"
    r"|-[sw]+|--(silent|quiet|print-directory|no-print-directory))$"
)
_MESSAGE_LETTERS = "sw"


def _split_escaped(text: str) -> list[str]:
    """Splits MAKEFLAGS on unescaped blanks (make escapes blanks in values with ``\\``)."""
    words: list[str] = []
    cur: list[str] = []
    it = iter(text)
    for ch in it:
        if ch == "\\":
            cur.append(ch)
            cur.append(next(it, ""))
        elif ch in " \t":
            if cur:
                words.append("".join(cur))
                cur = []
        else:
            cur.append(ch)
    if cur:
        words.append("".join(cur))
    return words


def split_makeflags(value: str) -> tuple[list[str], list[str]]:
    """MAKEFLAGS as (flags, command-line variable assignments)."""
    words = _split_escaped(value)
    if "--" in words:
        at = words.index("--")
        return words[:at], words[at + 1 :]
    return words, []


def normalize_makeflags(value: str) -> str:
    """MAKEFLAGS without the flags that cannot change what a memoized line does: the job
    count and jobserver, and those that only change make's own messages (``-O``, ``-s``,
    ``-w``, ``--no-print-directory``)."""
    flags, assignments = split_makeflags(value)
    kept = []
    for i, word in enumerate(flags):
        if i == 0 and not word.startswith("-"):  # make 4: the one-letter flags, no dash
            word = "".join(c for c in word if c not in _MESSAGE_LETTERS)
            if word:
                kept.append(word)
        elif not _IGNORED_FLAG.match(word):
            kept.append(word)
    if assignments:
        kept += ["--", *assignments]
    return " ".join(kept)


def override_names(value: str) -> list[str]:
    """The names of the variables set on make's command line (``make test FOO=1``)."""
    _, assignments = split_makeflags(value)
    names = []
    for word in assignments:
        m = re.match(r"([^:+?!=\s]+)\s*(?::{1,3}|\+|\?|!)?=", word)
        if m:
            names.append(m.group(1).replace("\\", ""))
    return names


def line_env(environ: Mapping[str, str]) -> dict[str, str]:
    """The make variables a memoized line gets, beyond ``pass_env``; all part of its key:
    MAKEFLAGS without the parallelism flags, and each variable set on make's command line
    (make exports those to every recipe)."""
    env: dict[str, str] = {}
    flags = environ.get("MAKEFLAGS")
    if flags is None:
        return env
    normal = normalize_makeflags(flags)
    if normal:
        env["MAKEFLAGS"] = normal
    for name in override_names(flags):
        if name in environ:
            env[name] = environ[name]
    return env


def jobserver_passed(environ: Mapping[str, str]) -> bool:
    """Whether make handed this process its jobserver pipe: it does so only for lines it
    runs recursively (``$(MAKE)`` or a ``+`` prefix)."""
    m = re.search(r"--jobserver-(?:auth|fds)=(\d+),(\d+)", environ.get("MAKEFLAGS", ""))
    if not m:
        return False
    try:
        os.fstat(int(m.group(1)))
    except OSError:
        return False
    return True
