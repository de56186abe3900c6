"""Reporting a build's results.

The result of each target and of the build, and the JSON and JUnit files made of them
(``report``); text made valid from paths that need not be (``textsafe``). The reporters
themselves are plugins (:mod:`memotest.builtin.terminal`, :mod:`memotest.builtin.reports`).

Hands on: a :class:`~memotest.reporting.report.Summary` (of
:class:`~memotest.reporting.report.TargetResult` s), to the ``memotest_report`` hook.
"""
