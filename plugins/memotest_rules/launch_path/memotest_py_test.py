"""Runs a ``py_test``'s main file as ``python3 MAIN ARGS`` would, with memotest's listing
watch installed first (``memotest_rules.plugin``; the watch is the one a plain pytest
process under tox or nox installs: ``memotest_pytest/walk_path/memotest_walk.py``).

Why: the workspace root is on ``PYTHONPATH``, so Python's import system lists it, and a
folder listed whole is an input whose every new entry re-runs the test. The watch reports
the names the import system looked for in each folder it listed
(``memotest/tracer/listing_reports.py``), so that the root is held by those names: a new
``NOTES.md`` does not re-run the test, a new module an import would now find first does.
No report (the watch could not be installed, the process was killed) keeps every folder
whole. The standard library only, so that any ``python3`` runs it.

``sys.argv`` is ``[MAIN, ARGS...]``, ``sys.path[0]`` MAIN's folder and ``__main__`` MAIN's
code, as ``python3 MAIN`` makes them.
"""

import os
import sys

REPORTS = "MEMOTEST_LISTINGS"


def watch_listings() -> None:
    """Installs memotest's listing watch in this process, and its report at exit."""
    folder = os.environ.pop(REPORTS, None)  # the processes this one starts do not report
    if not folder:
        return
    import json

    try:
        with open(os.path.join(folder, "watch.json"), "rb") as f:
            watch = json.loads(f.read())
        boot = {"__name__": "_memotest_boot"}
        exec(compile(watch["boot"][1], watch["boot"][0], "exec", dont_inherit=True), boot)
        package = boot["start_watch"](watch)  # late: this launcher's start-up came first
        listings = package.listings
        if not listings.FILL:
            return  # this import system cannot be watched: no report, all stays whole
    except Exception:
        return
    listings.report_at_exit(folder, package.interpreter.roots())


def main() -> None:
    if len(sys.argv) < 2:
        sys.stderr.write("usage: python3 memotest_py_test.py MAIN [ARGS...]\n")
        sys.exit(2)
    main_file = sys.argv[1]
    sys.argv = sys.argv[1:]
    sys.path[0] = os.path.dirname(os.path.abspath(main_file))
    watch_listings()
    import runpy

    runpy.run_path(main_file, run_name="__main__")


if __name__ == "__main__":
    main()
