"""Text that must be valid, made from paths that need not be.

Paths are bytes on Linux; memotest holds them as ``str`` decoded with ``surrogateescape``
(``os.fsdecode``), so a byte that is not UTF-8 (``\\xff``) is the lone surrogate
``\\udcff`` and ``os.fsencode`` gives the byte back. Where such text must be valid
(a terminal, a pipe, XML), the byte is written as the backslash escape ``\\xff``
(:func:`printable`, and the ``memotest-escape`` error handler that :func:`safe_streams`
puts on stdout and stderr). JSON keeps them as ``\\udcff`` escapes (lossless: what
Python's ``json`` writes with ``ensure_ascii``); the store keeps the bytes.
"""

from __future__ import annotations

import codecs
import contextlib
import sys

#: The name of the error handler registered by this module.
ESCAPE = "memotest-escape"


def _escape(exc: UnicodeError) -> tuple[str, int]:
    if not isinstance(exc, UnicodeEncodeError):
        raise exc
    out = []
    for ch in exc.object[exc.start : exc.end]:
        code = ord(ch)
        out.append(f"\\x{code - 0xDC00:02x}" if 0xDC80 <= code <= 0xDCFF else f"\\u{code:04x}")
    return "".join(out), exc.end


codecs.register_error(ESCAPE, _escape)


def printable(text: str) -> str:
    """``text`` with every byte that is not UTF-8 (a lone surrogate) as ``\\xNN``."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", ESCAPE).decode("utf-8")
    return text


def safe_streams() -> None:
    """stdout and stderr write such bytes as ``\\xNN`` rather than fail."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(AttributeError, ValueError):
            stream.reconfigure(errors=ESCAPE)  # type: ignore[union-attr]
