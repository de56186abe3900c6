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
from typing import TYPE_CHECKING

import pluggy

if TYPE_CHECKING:
    from memotest.config import Project
    from memotest.inputs.readers import Reader
    from memotest.model import Target
    from memotest.plugins import Config, LoadRequest
    from memotest.report import Summary, TargetResult

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


@hookspec
def memotest_readers() -> list[Reader]:
    """Readers this plugin knows: files that hold by a part of them when only certain
    code read them (:class:`memotest.inputs.readers.Reader`). The results of all plugins
    are concatenated; a path's reader is the first whose ``match`` fits its base name.
    A reader with ``callers`` counts in runs forked from a warm worker, whose audit hook
    checks each ``open`` against them; one without holds its files by their part
    whoever read them. ``digest(data, path)`` must be deterministic and return
    ``name + ":" + ...`` (``part_digest``), or ``UNPARSED`` for a file it cannot parse as
    the reader would (it then stays whole).

    Example (a ``setup.cfg`` read by a configuration search, by one section)::

        @hookimpl
        def memotest_readers():
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


__all__ = ["Path", "hookimpl", "hookspec"]
