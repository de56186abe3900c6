"""The nox helper, importable as ``from memotest.nox import memoized`` in a noxfile.

See :mod:`memotest_nox.helper` and ``docs/adapters/nox.md``.
"""

from memotest_nox.helper import MemoizedSession, memoized

__all__ = ["MemoizedSession", "memoized"]
