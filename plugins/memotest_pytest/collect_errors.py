"""What ``memotest build --pytest`` says when pytest cannot collect a test file: the file,
the line, and the error's last line, as pytest printed them."""

from __future__ import annotations

import os
import re
from pathlib import Path

from memotest.errors import ConfigError


def collection_error(rootdir: Path, cwd: Path, errors: list[dict[str, str]]) -> ConfigError:
    """Names the first file pytest could not collect and the error's last line."""
    first = errors[0]
    nodeid = first.get("nodeid") or ""
    file = nodeid.split("::", 1)[0]
    path = str(rootdir / file) if file else str(rootdir)
    text = (first.get("text") or "").strip().splitlines()
    message = _error_line(text)
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    line = _error_lineno(text, path, cwd) if file else None
    where = f"{path}:{line}" if line else path
    return ConfigError(f"{where}: pytest could not collect this file: {message}{more}")


def _error_line(lines: list[str]) -> str:
    # pytest's collection errors end with "E   SomeError: message" lines.
    marked = [ln[1:].strip() for ln in lines if ln.startswith("E ")]
    if marked:
        return marked[-1]
    return lines[-1].strip() if lines else "collection error"


_LOCATIONS = (
    re.compile(r"^(?P<file>\S+?):(?P<line>\d+): in "),  # pytest: "tests/t.py:3: in <module>"
    re.compile(r'File "(?P<file>[^"]+)", line (?P<line>\d+)'),  # a SyntaxError's location
)


def _error_lineno(lines: list[str], path: str, cwd: Path) -> str | None:
    """The last line number the error text gives for ``path`` (relative paths in pytest's
    traceback are relative to the folder it ran in)."""
    found = None
    for ln in lines:
        text = ln[1:].strip() if ln.startswith("E ") else ln.strip()
        for pattern in _LOCATIONS:
            m = pattern.search(text)
            if m and same_file(os.path.join(cwd, m.group("file")), path):
                found = m.group("line")
    return found


def same_file(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False
