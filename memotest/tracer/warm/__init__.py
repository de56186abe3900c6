"""Warm workers: a run forked from a process that has already started up.

A Python test target spends a good part of its time starting Python and importing its
test runner before its file's first test, every time. A target that declares ``warm``
modules (and whose command is ``PYTHON -m MODULE ARGS...``) can instead be forked from a
*worker*: a process of the same interpreter, folder and environment that imported those
modules once. Each run is a child of the worker that calls the shim's
``memotest_shim_retarget`` (so what it does from then on goes to its own run's log), takes
the run's environment, folder and stdio, and runs ``MODULE`` as ``python -m`` would.

What this costs the safety contract, and how it is paid:

* What the worker read while starting is part of every run: the worker's own trace (its
  log up to the moment it said it was ready) is put in front of each run's log, so every
  record holds the worker's inputs too, and a record is reused only if they still hold.
* The worker's memory must be what those inputs say. It is started once per build, and
  before every fork its inputs are compared with a stat snapshot taken when it became
  ready (itself checked for changes made while it started): if one changed, the worker
  is stopped and the run starts fresh. A change after the fork is a change during the
  run, which validation sees as for any run (the run's start time is taken before the
  comparison).
* A worker whose start-up could not be traced completely, that failed to import a
  module, or that has a second thread, is not used: its runs start fresh.

The modules: ``spec`` (what makes two runs able to share a worker), ``command`` (the
worker's command line: the modules of ``memotest/worker/`` it runs), ``worker`` (one
worker process, its start-up and its channel), ``remote`` (a run it forked, seen as a
Popen), ``pool`` (the workers of a build), ``preload`` (the book of what the next workers
preload) and ``reading`` (what plugins read in a run's report).
"""
