"""The C extension that notes which code objects a Python process executed
(``executed.c``), loaded by path into a warm worker of the same Python version."""

from __future__ import annotations

import importlib.machinery
from pathlib import Path


def extension_path() -> str | None:
    """The built extension's file, or None if it was not built."""
    here = Path(__file__).parent
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        candidate = here / f"_executed{suffix}"
        if candidate.is_file():
            return str(candidate)
    return None
