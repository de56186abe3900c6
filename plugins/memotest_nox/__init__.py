"""memotest adapter for nox: a loader (sessions as targets) and the ``memoized`` helper.

``plugin`` is the pluggy plugin (the ``memotest`` entry point ``nox``); ``helper`` holds
:func:`memoized`, importable in a noxfile as ``from memotest_nox import memoized``.
"""

from memotest_nox.helper import MemoizedSession, memoized

__all__ = ["MemoizedSession", "memoized"]
