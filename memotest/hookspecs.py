"""The hooks: memotest's public plugin API.

A plugin is a module or object with functions named like these hooks and marked with
:data:`hookimpl`; it is registered through the ``memotest`` entry-point group (or, for
the core's own plugins, by :mod:`memotest.plugins`). Hooks are called by name with
keyword arguments, so an implementation may accept only the arguments it needs.
Every hook below says when it is called, what it may return, and gives an example.
``docs/plugins.md`` walks through writing a complete plugin.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

import pluggy

if TYPE_CHECKING:
    from memotest.config import Project
    from memotest.model import Target
    from memotest.plugins import Config, LoadRequest
    from memotest.report import Summary, TargetResult
    from memotest.tracer.warm.reading import WarmReading

hookspec = pluggy.HookspecMarker("memotest")
hookimpl = pluggy.HookimplMarker("memotest")


@hookspec
def memotest_addoption(parser: argparse.ArgumentParser) -> None:
    """Add command-line options to ``memotest build`` and ``explain``.

    Called once per command line, before parsing. Options you add appear in
    ``config.options`` for every later hook.

    Example::

        @hookimpl
        def memotest_addoption(parser):
            parser.add_argument("--html-report", metavar="FILE")
    """


@hookspec
def memotest_configure(config: Config) -> None:
    """Called after the command line is parsed and before targets are loaded.

    ``config.options`` holds the parsed options; ``config.pluginmanager`` lets a plugin
    register or block others.

    Example::

        @hookimpl
        def memotest_configure(config):
            if config.options.html_report:
                config.pluginmanager.register(HtmlReport(config.options.html_report))
    """


@hookspec(firstresult=True)
def memotest_load_targets(request: LoadRequest) -> Project | None:
    """Load targets from a source, or return None if the source is not yours.

    ``request.path`` is the file given with ``-f`` (None when none was given),
    ``request.source`` the name given with ``--from`` (None when none was given),
    ``request.cwd`` the directory memotest runs in. With neither ``-f`` nor ``--from``,
    a loader may look for its own file in ``request.cwd`` (auto-detection); the core's
    ``memotest.toml`` loader is asked first. The first non-None result is used.
    Raise :class:`memotest.errors.ConfigError` with ``file:line: message`` for a source
    that is yours but cannot be used.

    Example::

        @hookimpl
        def memotest_load_targets(request):
            path = request.path or (request.cwd / "tests.json")
            if request.source not in (None, "json") or path.name != "tests.json":
                return None
            if not path.exists():
                return None
            return Project(path, path.parent, Settings(), targets_from_json(path))
    """


@hookspec(firstresult=True)
def memotest_is_input(path: str, target: Target) -> bool | None:
    """Decide whether an observed path is an input of ``target``.

    Called for every path the target observed, after the built-in rules (kernel file
    systems, the store, the private TMPDIR and ``ignore`` patterns are never inputs).
    Return False to drop the path, True to keep it, None to leave it to others.

    Example (a tool's cache that never changes a result)::

        @hookimpl
        def memotest_is_input(path, target):
            return False if "/.mypy_cache/" in path else None
    """


@hookspec(firstresult=True)
def memotest_fingerprint(path: str) -> str | None:
    """A custom content fingerprint for a regular file, or None for the default
    (xxh3-128 of the bytes). The first non-None result is used, as RTSLinux's ``cksum``
    extension point. It is called only when a file's stat signature changed, so it may
    be slower than hashing, but must be deterministic.

    Example (ignore a generated timestamp line)::

        @hookimpl
        def memotest_fingerprint(path):
            if not path.endswith(".gen.h"):
                return None
            text = Path(path).read_bytes()
            body = b"".join(l for l in text.splitlines(True) if not l.startswith(b"// at "))
            return xxhash.xxh3_128_hexdigest(body)
    """


@hookspec
def memotest_before_target(target: Target, env: dict[str, str]) -> None:
    """Called just before a stale target runs, in a worker thread. ``env`` is the
    environment the command will get: a plugin may add to it (the additions are not part
    of the target's key, so they must not change its result).

    Example::

        @hookimpl
        def memotest_before_target(target, env):
            env["COVERAGE_FILE"] = f"/tmp/cov/{target.name}"
    """


@hookspec
def memotest_after_target(target: Target, result: TargetResult) -> None:
    """Called after each target finished, was replayed from the cache or was skipped,
    in the main thread. ``result.status`` is passed, failed, cached, timeout, error or
    skipped.

    Example::

        @hookimpl
        def memotest_after_target(target, result):
            if result.status == "failed":
                notify(f"{target.name} failed")
    """


@hookspec
def memotest_build_start(targets: list[Target], config: Config) -> None:
    """Called once before the first target is planned, with every selected target."""


@hookspec
def memotest_target_running(names: list[str]) -> None:
    """Called whenever the set of running targets changes (for progress displays)."""


@hookspec
def memotest_report(summary: Summary, config: Config) -> None:
    """Called once at the end of a build with every result; write reports here.

    Example::

        @hookimpl
        def memotest_report(summary, config):
            print(f"{summary.count('cached')} targets replayed")
    """


@hookspec
def memotest_worker_modules(config: Config | None) -> list[ModuleType]:
    """Modules to load into every warm worker, in the target's interpreter.

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
def memotest_warm_report(config: Config | None, report: dict[str, Any]) -> WarmReading | None:
    """Read your part of the report of a run forked from a warm worker.

    Called when such a run ended, with its report (what your worker-side module's
    ``report`` added, its ``code``: the code it executed or why its files stay whole,
    its ``args``...). Return a :class:`memotest.tracer.warm.reading.WarmReading`, or
    None if the report says nothing to you: ``fresh`` names modules (and packages) the
    run must import itself (never preloaded, and a run whose worker preloaded one of them
    runs again as a fresh process), ``whole`` says the runs with these arguments keep
    their files whole (their next runs do not note the code they execute). Every
    plugin's reading counts.

    Example::

        @hookimpl
        def memotest_warm_report(report):
            if report.get("myrunner_loaded"):
                return WarmReading(fresh=frozenset({"myrunner.plugins"}))
            return None
    """


__all__ = ["Path", "hookimpl", "hookspec"]
