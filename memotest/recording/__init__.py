"""Recording a finished run.

The inputs fingerprinted right after the run, refined by their kinds, the log, outputs
and per-test results put in the store (``record``); which code each labelled part of a
run depended on, the map test-level selection reads (``parts``).

Hands on: a :class:`~memotest.store.Record`, to the store.
"""
