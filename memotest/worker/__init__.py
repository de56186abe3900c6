"""The code that runs inside a warm worker, in the target's interpreter.

A warm worker (``memotest/tracer/warm/``) is a process of the target's own interpreter,
in the target's folder and environment, that imports the target's warm modules once and
then forks each run. The modules of this package are what that process runs. The
target's interpreter is another Python, in another environment, that cannot import
memotest: so every module here uses the standard library only, in Python 3.10 syntax,
and reaches the others of the package by relative imports only (a test checks both).

How they get there: memotest starts ``PYTHON -c <the text of boot.py> CONFIG NAME PATH
SOURCE ...``. ``boot.py`` makes each ``NAME`` a module of its own (named
``_memotest_worker.NAME``, never a name the target's code could import), compiled from
``SOURCE`` under its real ``PATH`` (tracebacks show the file), or from that source as
memotest compiled it when the magic number is the interpreter's (``compiled:MAGIC:OPTIMIZE``,
then a ``CODE`` after each ``SOURCE``), in the order given, and
calls :func:`_memotest_worker.serve.main`. The worker reads none of these files itself:
memotest does, so they are not inputs of the runs.

The parts:

* ``audit``: the one audit hook, dispatching each event to the parts that watch it;
* ``listings``: the folders listed, and what was looked for in them;
* ``sections``: the files only their reader opened (the readers table of the config);
* ``codes``, ``code_watch`` and ``monitored``: the code a run executed (``sys.monitoring``
  on Python 3.12+), and its digests;
* ``extensions``: the worker-side modules plugins ship (``memotest_worker_modules``),
  called at defined moments;
* ``untimed``: os.path's and pathlib's yes-or-no probes, told to the shim as untimed (their
  files are kept out of the run's modification-time order); also loaded by
  ``memotest_walk`` into plain pytest processes;
* ``preload``: importing more before forking, and what a run imported;
* ``serve``: the start-up and the loop that forks each run;
* ``child``: what a forked child does to become the run, and its report.
"""
