"""The worker-side modules of plugins, and the moments the worker calls them at.

A plugin that knows what its own code does inside a run (its test runner's collection
lists folders on the way to a file, its assertion rewriter wants to import modules
itself...) ships a module of the standard library only and names it through the hook
``memotest_worker_modules``; the worker loads it (``boot.py``) and calls the functions
it defines, all optional, under these names (inside the run's process: they must not
raise):

* ``prepare(module, args)``: in the worker at start-up, after its imports and preload and
  before it says it is ready, when the spec names what to prepare (``Target.prepare``):
  sets up the run of ``python -m module`` with ``args`` as far as it can without knowing
  the run (a test runner's session configured, its plugins loaded), and returns the
  function each forked child then calls instead of running the module,
  ``run(job) -> exit status`` (``job["args"]`` are the run's own arguments); None if the
  module is not yours. What it prints goes to the worker's stderr; raising makes the
  worker unusable (its runs start fresh);
* ``before_run(job)``: in the forked child, before the run's module starts, when the run
  reports (``job`` is the request: ``module``, ``args``, ``cwd``, ``env``...);
* ``listing(where, frame)``: a folder ``where`` was listed by code the worker does not
  know (``frame``: the code that called ``os.listdir``/``os.scandir``): ``(names,
  patterns)`` that code looks for there (``listings.py``), or None if it is not yours;
* ``excluded(path)``: whether the code of the source file ``path`` is left out of the
  run's report of the code it executed (the plugin shows it otherwise);
* ``keep_whole(codes)``: given the code objects the run executed, why its Python files
  must stay whole (a string, reported as the run's ``code``), or None;
* ``report()``: at the run's end, the plugin's part of the run's report (a dict of
  JSON values, merged in; memotest's side reads it through ``memotest_warm_report``).
"""

#: Moment name -> the functions of the loaded modules for it, in load order.
TABLE = {}
MOMENTS = ("prepare", "before_run", "listing", "excluded", "keep_whole", "report")


def register(module):
    """Takes the functions ``module`` defines for the moments."""
    for name in MOMENTS:
        function = getattr(module, name, None)
        if callable(function):
            TABLE.setdefault(name, []).append(function)


def each(moment):
    """The functions registered for ``moment``."""
    return TABLE.get(moment, ())
