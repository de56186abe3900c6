"""The collection driver of ``memotest build --pytest``: which test files pytest would run.

Runs in the tests' interpreter, as ``python -m memotest_pytest.collect [PATH ...]`` (forked
from a warm worker when it can be), or as ``python -c <this file's source>`` when that
interpreter cannot import ``memotest_pytest``: so it needs pytest and the standard library
only. It reports as one JSON line after ``MARK`` on stdout (the output is memotest's
recorded log, replayed when nothing changed).

When the interpreter can import memotest's pytest plugin (``NARROW``), the collection stops
at files: every node pytest makes for a file (a ``Module``, a doctest file, a plugin's YAML
file) is noted and dropped before it is collected, so no test module is imported. The
plugin runs in the collection too, so that only the files pytest would keep are offered
(pytest 8+ also makes, then throws away, nodes for the other entries of every folder on the
way to the paths it was given). That is the list of files pytest would collect, found in a
fraction of the time, and the collection's record then depends on the folders, conftests
and configuration only, not on the code of every test module. A file that turns out to hold
no test runs as a target that passes (see ``narrow.py``); one that cannot be imported fails
when it runs, as it would under pytest. Without the plugin, the collection is pytest's full
one and only the files with tests become targets.
"""

import contextlib
import importlib.util
import json
import os
import sys
import warnings
from pathlib import Path

MARK = "memotest-pytest-collection: "
#: A line written as soon as pytest is configured (its plugins' ``pytest_configure`` done),
#: saying what a run of the files will be configured with (``early.py``).
CONFIGURED = "memotest-pytest-configured: "
NARROW = "memotest_pytest.narrow"
#: ``NARROW``'s option naming the one file to run, for a file pytest cannot be given as
#: an argument: a path holding ``[`` or ``::`` is read as a test selection
#: (``test_x[1].py``). memotest passes its folder as the argument and the file here.
ONLY = "--memotest-only"
#: ``NARROW``'s option naming the share of a file's tests a part runs (``split.py``).
PART = "--memotest-part"


def named_paths(config):  # no annotations: any Python the tests use runs this file
    """The paths pytest was given (or the one file ``--memotest-only`` names), absolute
    as pytest makes them; None with ``--pyargs``, none given, or one that does not exist.
    Here rather than in ``NARROW``, which uses it too: that plugin imports this module."""
    here = config.invocation_params.dir
    only = config.getoption("memotest_only", None)
    if only:
        path = Path(os.path.abspath(here / only))
        return (path,) if path.exists() else None
    if config.getoption("pyargs", False) or not config.args:
        return None
    paths = [Path(os.path.abspath(here / arg.split("::", 1)[0])) for arg in config.args]
    return tuple(paths) if all(p.exists() for p in paths) else None


def within(path, named):
    """Whether ``path`` is one of ``named`` or inside one."""
    return any(path == w or w in path.parents for w in named)


def main():
    def done(data):
        sys.stdout.flush()
        sys.stdout.write("\n" + MARK + json.dumps(data) + "\n")
        sys.stdout.flush()

    try:
        import pytest
    except BaseException as exc:
        done({"error": "import", "message": f"{type(exc).__name__}: {exc}"})
        sys.exit(0)
    try:
        narrow = importlib.util.find_spec(NARROW) is not None
    except ImportError:
        narrow = False
    # the plugin uses pytest 7's public API (StashKey, pytest.File, pytest.Package)
    narrow = narrow and hasattr(pytest, "StashKey") and hasattr(pytest, "Package")

    class Collect:
        def __init__(self, tell=None):
            self.files = {}
            self.errors = []
            self.rootdir = None
            self.inipath = None
            self.settings = True
            self.tell = tell  # a file descriptor of the output pytest does not capture

        @pytest.hookimpl(trylast=True)
        def pytest_configure(self, config):
            self.rootdir = str(config.rootpath)
            self.inipath = str(config.inipath) if config.inipath else None
            with warnings.catch_warnings():  # deprecated since pytest 9.1, gone in 10
                warnings.simplefilter("ignore")  # (and an error under filterwarnings)
                inicfg = getattr(config, "inicfg", None)
            self.settings = inicfg is None or len(inicfg) > 0  # unknown counts as some
            if self.tell is None:
                return
            try:
                said = {
                    "rootdir": self.rootdir,
                    "inipath": self.inipath,
                    "settings": self.settings,
                    "args": [str(Path(config.invocation_params.dir, a)) for a in config.args],
                    "python_files": list(config.getini("python_files")),
                    "norecursedirs": list(config.getini("norecursedirs")),
                }
                os.write(self.tell, ("\n" + CONFIGURED + json.dumps(said) + "\n").encode())
            except Exception:
                pass  # only a head start (early.py)

        def pytest_collectreport(self, report):
            if report.failed:
                self.errors.append({"nodeid": report.nodeid, "text": report.longreprtext})

        def pytest_collection_finish(self, session):
            for item in session.items:
                path = getattr(item, "path", None) or item.fspath
                self.files.setdefault(str(path), 0)
                self.files[str(path)] += 1

    class Noted(pytest.File):
        def collect(self):
            return []

    class FilesOnly(Collect):
        named = False  # not computed yet

        @pytest.hookimpl(hookwrapper=True)
        def pytest_collect_file(self, parent):
            outcome = yield
            if self.named is False:
                self.named = named_paths(parent.config)
            named = self.named
            result = []
            for node in outcome.get_result() or []:
                if isinstance(node, pytest.File) and not isinstance(node, pytest.Package):
                    if named is None or within(node.path, named):  # not a node pytest drops
                        self.files[str(node.path)] = 0
                    # an empty stand-in, so that a file named on the command line is found
                    result.append(Noted.from_parent(parent, path=node.path))
                else:
                    result.append(node)  # pytest 7's Package nodes: collected, to reach files
            outcome.force_result(result)

        def pytest_collection_finish(self, session):
            pass

    plugin = FilesOnly() if narrow else Collect()
    if narrow:  # the targets' runs can be configured by a worker (early.py)
        with contextlib.suppress(OSError):
            plugin.tell = os.dup(1)  # fd-capture redirects 1 while pytest runs
    args = ["--collect-only", "-q", "-p", "no:cacheprovider"] + (["-p", NARROW] if narrow else [])
    code = pytest.main(args + sys.argv[1:], plugins=[plugin])
    if plugin.tell is not None:
        os.close(plugin.tell)
    if narrow and code == 5 and plugin.files:
        code = 0  # every file was dropped before its tests were collected
    done(
        {
            "exit": int(code),
            "rootdir": plugin.rootdir,
            "inipath": plugin.inipath,
            "settings": plugin.settings,
            "files": plugin.files,
            "errors": plugin.errors,
            "narrow": narrow,
        }
    )


if __name__ == "__main__":
    main()
