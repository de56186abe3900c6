"""The worker-side modules of plugins, and the moments the worker calls them at.

A plugin that knows what its own code does inside a run (its test runner's collection
lists folders on the way to a file, its assertion rewriter wants to import modules
itself...) ships a module of the standard library only and names it through the hook
``memotest_worker_modules``; the worker loads it (``boot.py``) and calls the functions
it defines, all optional, under these names (inside the run's process: they must not
raise):

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
MOMENTS = ("before_run", "listing", "excluded", "keep_whole", "report")


def register(module):
    """Takes the functions ``module`` defines for the moments."""
    for name in MOMENTS:
        function = getattr(module, name, None)
        if callable(function):
            TABLE.setdefault(name, []).append(function)


def each(moment):
    """The functions registered for ``moment``."""
    return TABLE.get(moment, ())
