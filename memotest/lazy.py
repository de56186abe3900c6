"""A module imported on its first use, for the modules only some commands need.

Every ``memotest`` command imports the modules of a build (the plugins import them), and
some of those use a heavy library on one path only: psutil (30 named tuples and 8 regexes
at import) only while a traced run is watched. ``psutil = lazy_module("psutil")`` instead of
``import psutil`` leaves the code as it was (``psutil.Process(...)``,
``except psutil.Error``) and imports psutil at the first attribute looked up. Type checkers
are given the real import under ``TYPE_CHECKING``.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any


class LazyModule:
    """Stands for the module ``name`` until an attribute is asked for, then imports it."""

    def __init__(self, name: str) -> None:
        self._lazy_name = name
        self._lazy_module: ModuleType | None = None

    def __getattr__(self, attr: str) -> Any:
        module = self._lazy_module
        if module is None:
            module = self._lazy_module = importlib.import_module(self._lazy_name)
        return getattr(module, attr)

    def __repr__(self) -> str:
        state = "imported" if self._lazy_module is not None else "not imported yet"
        return f"<lazy module {self._lazy_name!r} ({state})>"


def lazy_module(name: str) -> Any:
    """``name``, imported when first used (see the module's docstring)."""
    return LazyModule(name)
