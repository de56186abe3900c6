"""memotest adapter for make.

* ``memotest-sh`` (``front/``, a C program, and :mod:`memotest_make.shell`): a ``SHELL``
  for make that memoizes the recipes of the targets you mark.
* the loader plugin (:mod:`memotest_make.plugin`): ``memotest build -f Makefile TARGET``
  runs make targets as memotest targets.

``docs/adapters/make.md`` is the user's guide.
"""
