"""memotest adapter for nox: a loader (sessions as targets) and the ``memoized`` helper.

``plugin`` is the pluggy plugin (the ``memotest`` entry point ``nox``); ``helper`` holds
:func:`memoized`, importable in a noxfile as ``from memotest_nox import memoized``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from memotest_nox.helper import MemoizedSession, memoized

__all__ = ["MemoizedSession", "memoized"]


def __getattr__(name: str) -> Any:
    """``memoized`` and ``MemoizedSession``, imported on first use: every memotest command
    loads this package (for its ``plugin``), and the helper imports the whole build."""
    if name in __all__:
        from memotest_nox import helper

        return getattr(helper, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
