"""The build loop of ``memotest build``, at the top of the engine.

``build`` plans every target in one batch, then starts what may start and reaps what
finished (ninja's ``Builder::Build``): the targets on their way (``build_queue``), what
runs them (``command_runner``, with make's jobserver: ``jobserver``), the rules of which
targets may run side by side and in what order (``schedule``), the order edges, hazards
and re-checks those give (``conflicts``), ``--audit`` (``audit``) and ``--shard``
(``shard``).

Hands on: a :class:`~memotest.reporting.report.Summary`, to the reporters.
"""
