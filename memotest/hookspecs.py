"""The hooks: memotest's public plugin API.

A plugin is a module or object with functions named like these hooks and marked with
:data:`hookimpl`; it is registered through the ``memotest`` entry-point group, named in
``MEMOTEST_PLUGINS``, or registered by another plugin (``config.pluginmanager.register``
in ``memotest_configure``, as the built-in terminal reporter is). Hooks are called by name
with keyword arguments, so an implementation may accept only the arguments it needs.
A marked function whose name is no hook below is an error (exit 2) naming it.

Every hook gets ``config`` (:class:`memotest.load.plugins.Config`: the parsed command line in
``config.options`` and the plugin manager), besides its own arguments; only
``memotest_addoption`` comes before there is one and gets the plugin manager instead. Inside
another tool (tox, nox, make) there is no memotest command line and ``config.options`` is
empty. Each hook below says when it is called, in which thread, what it may return and
whether the first non-None result wins, with an example. ``docs/plugins.md`` lists them
and walks through writing a complete plugin.
"""

from __future__ import annotations

import argparse
from types import ModuleType
from typing import TYPE_CHECKING, Any

import pluggy

if TYPE_CHECKING:
    from memotest.inputs.readers import Reader
    from memotest.load.config import Project
    from memotest.load.plugins import Config, LoadRequest, PluginManager
    from memotest.model import Target
    from memotest.reporting.report import Summary, TargetResult
    from memotest.tracer.warm.reading import WarmReading

hookspec = pluggy.HookspecMarker("memotest")
hookimpl = pluggy.HookimplMarker("memotest")


@hookspec(historic=True)
def memotest_addoption(parser: argparse.ArgumentParser, pluginmanager: PluginManager) -> None:
    """Add command-line options to ``memotest build`` and ``explain``.

    Called once for each of the two parsers, in the main thread, before the command line
    is parsed (so before there is a ``config``); returns nothing. Historic: a plugin
    registered later gets the earlier calls when it registers. Options you add appear in
    ``config.options`` for every later hook.

    Example::

        @hookimpl
        def memotest_addoption(parser, pluginmanager):
            parser.add_argument("--html-report", metavar="FILE")
    """


@hookspec(historic=True)
def memotest_configure(config: Config) -> None:
    """Called once per command that works on targets (``build``, ``explain``), in the main
    thread, after the command line is parsed and before targets are loaded; returns
    nothing. Historic: a plugin registered later (by another plugin's
    ``memotest_configure``) is configured when it registers. ``config.pluginmanager`` lets
    a plugin register or block others; raise :class:`memotest.errors.UsageError` for an
    option that cannot be used.

    Example::

        @hookimpl
        def memotest_configure(config):
            if config.options.html_report:
                config.pluginmanager.register(HtmlReport(config.options.html_report))
    """


@hookspec
def memotest_unconfigure(config: Config) -> None:
    """Called once at the end of every command that called ``memotest_configure``, in the
    main thread, whether the command succeeded, failed or was interrupted (also when a
    ``memotest_configure`` raised); returns nothing. Undo what ``memotest_configure`` did.

    Example::

        @hookimpl
        def memotest_unconfigure(config):
            reporter = config.pluginmanager.get_plugin("htmlreport")
            if reporter is not None:
                config.pluginmanager.unregister(reporter)
    """


@hookspec(firstresult=True)
def memotest_load_targets(request: LoadRequest, config: Config) -> Project | None:
    """Load targets from a source, or return None if the source is not yours.

    Called once per command that works on targets, in the main thread. ``request.path`` is
    the file given with ``-f`` (None when none was given), ``request.source`` the name
    given with ``--from`` (None when none was given), ``request.cwd`` the directory
    memotest runs in. With neither ``-f`` nor ``--from``, a loader may look for its own
    file in ``request.cwd`` (auto-detection); the core's ``memotest.toml`` loader is asked
    first. First result wins: the first non-None :class:`memotest.load.config.Project` is used.
    Raise :class:`memotest.errors.ConfigError` with ``file:line: message`` for a source
    that is yours but cannot be used.

    Example::

        @hookimpl
        def memotest_load_targets(request, config):
            path = request.path or (request.cwd / "tests.json")
            if request.source not in (None, "json") or path.name != "tests.json":
                return None
            if not path.exists():
                return None
            return Project(path, path.parent, Settings(), targets_from_json(path))
    """


@hookspec
def memotest_ignore(config: Config) -> list[str]:
    """Paths that are never inputs, as ``ignore`` globs: a tool's own cache folder, which
    the tool writes and reads but which never changes a result.

    Called each time settings are made (``Settings()``: by every loader, and inside tox,
    nox and make), in the thread that makes them; every result is used, added to the core's
    (``**/__pycache__/**``, ``**/.memotest/**``) and to the targets file's ``ignore``.
    The patterns must not depend on the command line, which may be absent.

    Example::

        @hookimpl
        def memotest_ignore(config):
            return ["**/.mypy_cache/**"]
    """


@hookspec(firstresult=True)
def memotest_is_input(path: str, target: Target, config: Config) -> bool | None:
    """Decide whether an observed path is an input of ``target``.

    Called in the main thread for every path the target observed, when its record is
    made, after the built-in rules (kernel file systems, the store, the private TMPDIR
    and ``ignore`` patterns are never inputs). First result wins: return False to drop the
    path, True to keep it, None to leave it to others.

    Example (a path known only at run time)::

        @hookimpl
        def memotest_is_input(path, target, config):
            return False if path.startswith(target.cwd + "/build/") else None
    """


@hookspec
def memotest_readers(config: Config) -> list[Reader]:
    """Readers this plugin knows: files that hold by a part of them when only certain
    code read them (:class:`memotest.inputs.readers.Reader`). The results of all plugins
    are concatenated; a path's reader is the first whose ``match`` fits its base name.
    A reader with ``callers`` counts in runs forked from a warm worker, whose audit hook
    checks each ``open`` against them; one without holds its files by their part
    whoever read them. ``digest(data, path)`` must be deterministic and return
    ``name + ":" + ...`` (``part_digest``), or ``UNPARSED`` for a file it cannot parse as
    the reader would (it then stays whole).

    Called when a build, ``explain`` or a memoized command first needs the readers, in
    the main thread; ``config`` may have no command line (inside tox, nox and make).

    Example (a ``setup.cfg`` read by a configuration search, by one section)::

        @hookimpl
        def memotest_readers(config):
            def digest(data, path):
                parser = configparser.ConfigParser(interpolation=None)
                try:
                    parser.read_string(data.decode("utf-8"))
                    section = dict(parser["tool:mytool"]) if "tool:mytool" in parser else {}
                except (ValueError, configparser.Error):
                    return UNPARSED
                return part_digest("tool:mytool", json.dumps(section, sort_keys=True).encode())

            return [
                Reader(
                    name="tool:mytool",
                    match="setup.cfg",
                    callers=(Caller(files=("/mytool/config.py",)),),
                    digest=digest,
                    holds_by="its [tool:mytool] section",
                    unparsed="no longer parses as an INI file",
                )
            ]
    """


@hookspec
def memotest_build_start(targets: list[Target], config: Config) -> None:
    """Called once per build, in the main thread, before the first target is planned,
    with every selected target; returns nothing.

    Example::

        @hookimpl
        def memotest_build_start(targets, config):
            print(f"{len(targets)} targets selected")
    """


@hookspec
def memotest_before_target(target: Target, env: dict[str, str], config: Config) -> None:
    """Called just before a stale target runs, in the worker thread that runs it (so
    implementations must be thread-safe); returns nothing. ``env`` is the environment the
    command will get: a plugin may add to it (the additions are not part of the target's
    key, so they must not change its result).

    Example::

        @hookimpl
        def memotest_before_target(target, env, config):
            env["COVERAGE_FILE"] = f"/tmp/cov/{target.name}"
    """


@hookspec
def memotest_target_running(names: list[str], config: Config) -> None:
    """Called in the main thread whenever the set of running targets changes, with their
    names (for progress displays); returns nothing.

    Example::

        @hookimpl
        def memotest_target_running(names, config):
            set_window_title(", ".join(names) or "idle")
    """


@hookspec
def memotest_after_target(target: Target, result: TargetResult, config: Config) -> None:
    """Called once per target, in the main thread, after it finished, was replayed from
    the cache or was skipped; returns nothing. ``result.status`` is passed, failed,
    cached, timeout, error or skipped. Once more for a replayed target that runs after
    all, because a run of the build wrote what it read: that ``result.replaces`` the
    first (count the target once, with its last result, as the summary does).

    Example::

        @hookimpl
        def memotest_after_target(target, result, config):
            if result.status == "failed":
                notify(f"{target.name} failed")
    """


@hookspec
def memotest_report(summary: Summary, config: Config) -> None:
    """Called once at the end of a build, in the main thread, with every result; write
    reports here. Returns nothing.

    Example::

        @hookimpl
        def memotest_report(summary, config):
            print(f"{summary.count('cached')} targets replayed")
    """


@hookspec
def memotest_worker_modules(config: Config) -> list[ModuleType]:
    """Modules to load into every warm worker, in the target's interpreter.

    Called when a warm worker is started (in the thread that needs it first); every
    result is used.

    A warm worker imports a target's ``warm`` modules once and forks each run; it runs in
    the target's interpreter, which cannot import memotest nor your plugin. Return the
    modules you ship for it: each must be one file of the standard library only (Python
    3.10 syntax), importing at its top only what the interpreter has at start-up
    (``os``, ``sys``: what is imported before the worker watches its listings counts as
    looked for in every folder). memotest sends the file's source to the worker, which
    makes it a module and calls the functions it defines, all optional, at these moments
    (``memotest/worker/extensions.py``); they run inside the run's process, so they must
    not raise:

    * ``before_run(job)``: in the forked child, before the run's module starts;
    * ``listing(where, frame)``: a folder was listed by code memotest does not know:
      ``(names, patterns)`` that code looks for in it, or None if it is not yours;
    * ``excluded(path)``: whether the code of this source file is left out of what the
      run reports it executed (its file then stays whole);
    * ``keep_whole(codes)``: given the code objects the run executed, why its Python
      files must stay whole, or None;
    * ``report()``: a dict of JSON values merged into the run's report (read it back with
      ``memotest_warm_report``).

    Example::

        # myplugin/worker_side.py: the standard library only
        def report():
            import sys
            return {"myrunner_loaded": "myrunner" in sys.modules}

        # myplugin/plugin.py
        from myplugin import worker_side

        @hookimpl
        def memotest_worker_modules(config):
            return [worker_side]
    """


@hookspec
def memotest_warm_report(report: dict[str, Any], config: Config) -> WarmReading | None:
    """Read your part of the report of a run forked from a warm worker.

    Called in the thread that ran it, when such a run ended, with its report (what
    your worker-side module's ``report`` added, its ``code``: the code it executed or
    why its files stay whole, its ``args``...). Return a
    :class:`memotest.tracer.warm.reading.WarmReading`, or
    None if the report says nothing to you: ``fresh`` names modules (and packages) the
    run must import itself (never preloaded, and a run whose worker preloaded one of them
    runs again as a fresh process), ``whole`` says the runs with these arguments keep
    their files whole (their next runs do not note the code they execute), and
    ``unfaithful`` says why else the run's result is not what a fresh run's would be
    (phrases; the run runs again as a fresh process). Every plugin's reading counts.

    Example::

        @hookimpl
        def memotest_warm_report(report, config):
            if report.get("myrunner_loaded"):
                return WarmReading(fresh=frozenset({"myrunner.plugins"}))
            return None
    """
