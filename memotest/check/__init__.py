"""Deciding fresh or stale, before anything runs.

The key of a target (``keys``: its definition and the environment it runs with;
``shaping``: the settings that shaped its record), which recorded fingerprints hold now
(``holds``: the no-op build's hot loop), the decision over a target's recorded runs
(``plan``) and the words of its reason (``verdict``); for a stale test file, the tests
whose result could have changed (``select``).

Hands on: a :class:`~memotest.check.verdict.Fresh` (the record to replay) or a
:class:`~memotest.check.verdict.Stale` (with the reason ``explain`` prints).
"""
