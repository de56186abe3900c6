"""Running and observing one target.

Before the run, the files its last run read and then wrote, as they are now
(``rewritten``); the command under the tracer (``runner``: a private TMPDIR, the log,
the timeout; ``scratch`` folders; the ``signals`` every run gets; the per-test outcomes
it reports, ``testcases``); after it, which traced paths are inputs, of which kind, and
what makes the result not reusable (``observe``).

Hands on: a :class:`~memotest.model.Outcome` (with its :class:`~memotest.model.Trace`),
seen as :class:`~memotest.run.observe.Observations`.
"""
