"""What a warm worker does for pytest, inside the run (``memotest/worker/extensions.py``).

memotest sends this file to every warm worker (``memotest_worker_modules``), in the
target's interpreter: the standard library only, Python 3.10 syntax, and at the top only
the imports the interpreter has at start-up. The worker calls, at their moments:

* ``before_run``: pytest's assertion rewriter leaves ``sys.meta_path`` when pytest ends,
  so what it is told to rewrite is noted as it is told (``mark_rewrite``); ``report``
  gives those names (``marked``): a module pytest wants to rewrite cannot have been
  preloaded (``memotest_pytest/warm.py``).
* ``listing``: pytest's collection, on its way down to the test file it is given, lists
  each folder above the file and collects only the entry that leads to the file (pytest 8
  makes a collector for every entry and drops the others unmatched): that entry is what
  it looks for there. This rests on a hook of a pytest plugin doing nothing with the
  entries of those folders that pytest then drops. A folder pytest collects whole, in a
  plain pytest process with ``memotest_walk`` (tox, nox), is held by the entries that can
  change what pytest collects there (``memotest_walk.collect_patterns``: none of a dot's
  leftovers, when only pytest's own hooks collect).
* ``excluded``: the code of what pytest collects (test files, ``conftest.py``) is left out
  of the report of the code a run executed: its lines show in pytest's own report, so
  those files stay whole.
* ``keep_whole``: a run that ran Hypothesis's engine keeps its files whole: another run
  tries other examples, so other code.
"""

import os
import sys

#: pytest's collectors, whose ``collect`` lists a folder through ``_pytest/pathlib.py``.
COLLECT_FILES = ("/_pytest/main.py", "/_pytest/python.py")
#: The engine of Hypothesis: a run that ran it keeps its files whole.
HYPOTHESIS_ENGINE = "/hypothesis/internal/conjecture/engine.py"
#: What such a run reports as its ``code`` (``memotest_pytest/warm.py`` reads it).
RAN_HYPOTHESIS = "it ran Hypothesis"
MARKS = set()


def before_run(job):
    """Notes the names pytest's rewrite hook is told to rewrite, as it is told."""
    rewrite = sys.modules.get("_pytest.assertion.rewrite")
    hook = getattr(rewrite, "AssertionRewritingHook", None)
    mark = getattr(hook, "mark_rewrite", None)
    if mark is None:
        return

    def mark_rewrite(self, *names):
        MARKS.update(n for n in names if isinstance(n, str))
        return mark(self, *names)

    mark_rewrite.__wrapped__ = mark
    hook.mark_rewrite = mark_rewrite


def asked(collector):
    """The paths the ``collector``'s session was asked to collect, absolute; None if they
    cannot be told."""
    try:
        config = collector.config
        start = str(config.invocation_params.dir)
        return [
            os.path.normpath(os.path.join(os.getcwd(), start, str(a).split("::", 1)[0]))
            for a in config.args
        ]
    except Exception:
        return None


def below(where, collector):
    """The entries of ``where`` that lead to what pytest was asked to collect (the
    arguments of the ``collector``'s session); None if one of them is ``where`` or a
    folder above it (pytest then collects all of it), or none is inside it."""
    args = asked(collector)
    if args is None:
        return None
    base = os.path.join(where, "")
    names = set()
    for arg in args:
        if arg == where or base.startswith(os.path.join(arg, "")):
            return None
        if arg.startswith(base):
            names.add(arg[len(base) :].split("/", 1)[0])
    return names or None


def listing(where, frame):
    """pytest's collection listing a folder above the file it collects: the entries
    that lead to the file."""
    code, up = frame.f_code, frame.f_back
    if code.co_name != "scandir" or not code.co_filename.endswith("/_pytest/pathlib.py"):
        return None
    if up is None or up.f_code.co_name != "collect":
        return None
    if not up.f_code.co_filename.endswith(COLLECT_FILES):
        return None
    collector = up.f_locals.get("self")
    names = below(where, collector)
    if names is not None:
        return names, ()
    # A folder collected whole: in a plain pytest process (tox, nox), ``memotest_walk``
    # says which entries can change what pytest collects there.
    walk = sys.modules.get("memotest_walk")
    collect_patterns = getattr(walk, "collect_patterns", None)
    if collect_patterns is None or not collects_all(where, collector):
        return None
    patterns = collect_patterns(collector.config)
    return None if patterns is None else ((), patterns)


def collects_all(where, collector):
    """Whether pytest was asked to collect ``where`` or a folder above it."""
    base = os.path.join(where, "")
    return any(
        arg == where or base.startswith(os.path.join(arg, "")) for arg in asked(collector) or ()
    )


def excluded(path):
    """Whether ``path`` is a file pytest collects (its lines show in pytest's report)."""
    base = os.path.basename(path)
    return base == "conftest.py" or base.startswith("test_") or base.endswith("_test.py")


def keep_whole(codes):
    """Whether the run ran Hypothesis's engine (``ConjectureRunner``)."""
    for code in codes:
        name = getattr(code, "co_qualname", code.co_name)
        if code.co_filename.endswith(HYPOTHESIS_ENGINE) and name.startswith("ConjectureRunner."):
            return RAN_HYPOTHESIS
    return None


def report():
    """The names pytest marked for rewriting."""
    return {"marked": sorted(MARKS)}
