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
MARKS_WATCHED = []


def before_run(job):
    """Notes the names pytest's rewrite hook is told to rewrite, as it is told."""
    if MARKS_WATCHED:
        return  # a prepared worker's: its children inherit the watch
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
    MARKS_WATCHED.append(True)


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
    """Whether the run ran Hypothesis's engine (``ConjectureRunner``). The engine's file
    is picked in C: a run executes thousands of code objects."""
    from itertools import compress
    from operator import attrgetter, methodcaller

    in_engine = methodcaller("endswith", HYPOTHESIS_ENGINE)
    for code in compress(codes, map(in_engine, map(attrgetter("co_filename"), codes))):
        if getattr(code, "co_qualname", code.co_name).startswith("ConjectureRunner."):
            return RAN_HYPOTHESIS
    return None


#: Why this run's result may not be a fresh run's (``unfaithful``): it runs again fresh.
UNFAITHFUL = []


def report():
    """The names pytest marked for rewriting, and why the run is not a fresh one's."""
    return {"marked": sorted(MARKS), "unfaithful": list(UNFAITHFUL)}


def unfaithful(files, folder):
    """Why a run of ``files`` from a worker prepared for ``folder`` would not be a fresh
    run's: a ``conftest.py`` in a folder between one of them and ``folder``, which a
    fresh pytest imports as an initial conftest and the run would import late, during
    its collection. The loader gave that folder because there was none
    (``pinned.conftest_folder``); one made since is found here."""
    for name in files:
        here = os.path.dirname(os.path.abspath(str(name).split("::")[0]))
        while here != folder and here.startswith(folder + os.sep):
            if os.path.isfile(os.path.join(here, "conftest.py")):
                return f"{os.path.join(here, 'conftest.py')} is not its worker's"
            here = os.path.dirname(here)
    return None


#: The run a worker prepared (``prepare``): pytest's config, the arguments common to its
#: runs, and the positional arguments that came before the placeholder (``addopts``').
PREPARED = {}
#: The last argument of a preparation: a path that stands for any file of its folder.
PLACEHOLDER = "__memotest_prepared__"


def prepare(module, args):
    """pytest configured as ``python -m pytest ARGS FILE`` would be, for any test FILE of
    one folder, up to its session: the plugins loaded under pytest's own assertion
    rewriting, the initial conftests imported, ``pytest_configure`` done (each child then
    makes the global capture its own: ``own_capture``). ``args``
    ends with a placeholder, ``FOLDER/__memotest_prepared__``, which pytest takes for a
    file there that exists (its conftests are those of every file of FOLDER) without
    looking at any. Returns the function each child runs (``run_prepared``); None when
    this pytest cannot be prepared so (the children then run ``python -m pytest``)."""
    if module != "pytest" or not args or os.path.basename(args[-1]) != PLACEHOLDER:
        return None
    # The worker imported pytest (its warm module): this module imports nothing itself.
    pytest = sys.modules.get("pytest")
    pytest_config = sys.modules.get("_pytest.config")
    if pytest is None or pytest_config is None:
        return None

    real_exists = getattr(pytest_config, "safe_exists", None)
    config_class = getattr(pytest_config, "Config", None)
    if real_exists is None or not hasattr(config_class, "_do_configure"):
        return None
    before_run(None)  # what pytest marks for rewriting while it configures
    placeholder = os.path.abspath(args[-1])

    def safe_exists(path):
        return os.path.abspath(str(path)) == placeholder or real_exists(path)

    os.environ["PYTEST_VERSION"] = pytest.__version__
    sys.argv = [main_path(), *args]
    pytest_config.safe_exists = safe_exists
    try:
        config = pytest_config._prepareconfig(list(args))
    finally:
        pytest_config.safe_exists = real_exists
    given = list(getattr(config.option, "file_or_dir", None) or ())
    if not given or os.path.abspath(str(given[-1])) != placeholder:
        raise RuntimeError("pytest did not take the placeholder as the last path")
    config._do_configure()
    PREPARED.update(config=config, common=list(args[:-1]), before=given[:-1])
    PREPARED["folder"] = os.path.dirname(placeholder)
    PREPARED["main"] = sys.argv[0]  # each run's: found once (a worker's input, as pytest)
    PREPARED["session"] = prepare_session(config)
    compile_xml_escape()
    return run_prepared


def compile_xml_escape():
    """Compiles, once in the worker, the pattern pytest's XML report compiles at each
    run's first report (``_pytest.junitxml.bin_xml_escape``, which memotest's results
    use: 10-40 ms): it stays in ``re``'s cache, which each child inherits. Reads no file."""
    escape = getattr(sys.modules.get("_pytest.junitxml"), "bin_xml_escape", None)
    if escape is not None:
        escape("")


def prepare_session(config):
    """pytest's ``Session`` and its ``FixtureManager``, made in the worker as
    ``wrap_session`` and ``_pytest.fixtures.pytest_sessionstart`` make them in each run:
    the manager parses the fixtures of every plugin registered so far (the initial
    conftests', kept for their folder's collection), which a fresh pytest does at each
    session's start (about 70 ms with a few dozen plugins). Both are made from the
    configuration alone, reading no file; each child takes them over
    (``hand_over_session``). ``(session, manager)``, or None when this pytest has not
    these two as expected (each child then makes its own)."""
    main = sys.modules.get("_pytest.main")
    fixtures = sys.modules.get("_pytest.fixtures")
    session_class = getattr(main, "Session", None)
    manager_class = getattr(fixtures, "FixtureManager", None)
    start = getattr(fixtures, "pytest_sessionstart", None)
    if session_class is None or manager_class is None or start is None:
        return None
    if "FixtureManager" not in getattr(getattr(start, "__code__", None), "co_names", ()):
        return None  # this pytest makes its manager otherwise
    session = session_class.from_config(config)
    return session, manager_class(session)


#: What ``hand_over_session`` replaced, for ``take_back_session``.
REPLACED = []


def hand_over_session(config):
    """Has this child's ``wrap_session`` take the session the worker made, and
    ``_pytest.fixtures.pytest_sessionstart`` its fixture manager, each once: the next
    ``Session.from_config(config)`` and ``FixtureManager(session)`` return them (any
    later ones, such as a pytester's in-process run, make their own)."""
    made = PREPARED.get("session")
    if made is None:
        return
    session, manager = made
    session_class = type(session)
    fixtures = sys.modules["_pytest.fixtures"]
    manager_class = fixtures.FixtureManager
    from_config = session_class.__dict__.get("from_config")

    def session_once(cls, given):
        take_back_session(only="session")
        if given is config and cls is session_class:
            return session
        return cls.from_config(given)

    def manager_once(given):
        take_back_session(only="manager")
        return manager if given is session else manager_class(given)

    REPLACED.append(("session", session_class, "from_config", from_config))
    REPLACED.append(("manager", fixtures, "FixtureManager", manager_class))
    session_class.from_config = classmethod(session_once)
    fixtures.FixtureManager = manager_once


def take_back_session(only=None):
    """Puts back what ``hand_over_session`` replaced (only the one named ``only``)."""
    for entry in list(REPLACED):
        what, owner, name, value = entry
        if only is not None and what != only:
            continue
        REPLACED.remove(entry)
        if value is None:
            delattr(owner, name)
        else:
            setattr(owner, name, value)


def own_capture(capman):
    """Makes pytest's global capture, started in the worker (around the initial
    conftests, as in any pytest process) and suspended, this child's: the same objects
    (what the conftests imported meanwhile may hold ``sys.stdout``, which was the
    capture's file then), but its file descriptors restore this child's standard streams
    and capture into a file of this child's own, which starts with what the worker's
    captured."""
    import tempfile

    capturing = getattr(capman, "_global_capturing", None)
    for capture in (getattr(capturing, name, None) for name in ("in_", "out", "err")):
        target = getattr(capture, "targetfd", None)
        saved = getattr(capture, "targetfd_save", None)
        if not isinstance(target, int) or not isinstance(saved, int):
            continue  # not a file descriptor's capture (--capture=sys: in memory)
        os.dup2(target, saved)
        tmpfile = getattr(capture, "tmpfile", None)
        if target == 0 or tmpfile is None:
            continue
        old = tmpfile.fileno()
        size = os.fstat(old).st_size
        held = os.pread(old, size, 0) if size else b""
        with tempfile.TemporaryFile(buffering=0) as fresh:
            fresh.write(held)
            os.dup2(fresh.fileno(), old)


def main_path():
    """The file ``python -m pytest`` runs (its ``sys.argv[0]``)."""
    import importlib.util

    spec = importlib.util.find_spec("pytest.__main__")
    return getattr(spec, "origin", None) or "pytest"


def run_prepared(job):
    """In a forked child: pytest's session for the run's own file(s), on the config the
    worker prepared, as ``pytest.main`` would go on after its configuration. Returns the
    exit status."""
    pytest = sys.modules["pytest"]
    Config = sys.modules["_pytest.config"].Config
    config = PREPARED["config"]
    args = list(job["args"])
    common = PREPARED["common"]
    if args[: len(common)] != common:
        sys.stderr.write("memotest: this warm worker was prepared for other arguments\n")
        return 70
    os.environ["PYTEST_VERSION"] = pytest.__version__
    sys.argv[0] = PREPARED["main"]
    own_capture(config.pluginmanager.getplugin("capturemanager"))
    faults = config.pluginmanager.getplugin("faulthandler")
    if faults is not None:
        try:
            faults.pytest_unconfigure(config)
            faults.pytest_configure(config)
        except Exception:
            pass
    try:
        try:
            option = config.option
            rest = args[len(common) :]
            parse = getattr(config._parser, "parse_setoption", None)
            if parse is not None:  # pytest < 9
                files = parse(rest, option, namespace=option)
            else:
                files = config._parser.parse(rest, namespace=option).file_or_dir
            why = unfaithful(files, PREPARED["folder"])
            if why is not None:  # the run starts again, fresh (``warm.py``)
                UNFAITHFUL.append(why)
                return 0
            option.file_or_dir = [*PREPARED["before"], *files]
            config.known_args_namespace.file_or_dir = list(option.file_or_dir)
            config.args = [str(a) for a in option.file_or_dir]
            config.args_source = Config.ArgsSource.ARGS
            config.invocation_params = Config.InvocationParams(
                args=args, plugins=None, dir=config.invocation_params.dir
            )
            config._do_configure = lambda: None  # done in the worker
            hand_over_session(config)
            try:
                ret = config.hook.pytest_cmdline_main(config=config)
            finally:
                take_back_session()
            if ret in iter(pytest.ExitCode):
                ret = pytest.ExitCode(ret)
        finally:
            config._ensure_unconfigure()
    except pytest.UsageError as exc:
        for message in exc.args:
            sys.stderr.write(f"ERROR: {message}\n")
        ret = pytest.ExitCode.USAGE_ERROR
    sys.stdout.flush()
    return int(ret)
