"""One step, two drivers.

The step every target takes, whoever drives it (``step``: check, replay or snapshot, run,
record, and the target hooks); memotest's own failures once a command started leave its
result standing, once (``faults``). The drivers are the build loop (:mod:`memotest.loop`)
and :func:`memotest.memo.run_memoized`.

Hands on: a :class:`~memotest.reporting.report.TargetResult`, to its driver.
"""
