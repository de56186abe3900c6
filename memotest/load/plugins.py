"""The plugin manager: the core's own plugins, then every ``memotest`` entry point.

The core is plugins too: the targets-file loader, the terminal reporter and
the JSON/JUnit reports are registered here as built-in plugins, and the adapters for other
tools are found through the ``memotest`` entry-point group like any third-party plugin. A
plugin that fails to import is reported by name and left out; it is an error only when it
was the one asked for (``--from NAME``). Modules named in ``MEMOTEST_PLUGINS``
(comma-separated, importable) are registered too: the way to try a plugin without
packaging it.

A plugin's hook implementations are checked against the specs in :mod:`memotest.hookspecs`
once every plugin is registered, and again after ``memotest_configure`` (which may register
more): a misspelled hook is a usage error naming it, not a hook silently never called.

A command that configures plugins does it through :func:`configured`:
``memotest_configure`` (historic: a plugin registered later gets it too), then
``memotest_unconfigure`` once when the command ends, whether it succeeded or not.

The manager is the process's (:func:`manager`): a command line and the drivers that run
inside other tools (tox, nox, make) share it; it holds no per-command state.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import pluggy

from memotest import hookspecs
from memotest.errors import UsageError
from memotest.load.entrypoints import entry_points  # importlib.metadata's, without importing it

BUILTIN = (
    "memotest.builtin.targets_file",
    "memotest.builtin.terminal",
    "memotest.builtin.reports",
    "memotest.builtin.readers",
)
ENTRY_POINT_GROUP = "memotest"


class PluginManager(pluggy.PluginManager):
    """pluggy's manager, plus the installed plugins that failed to import (name -> error)."""

    def __init__(self) -> None:
        super().__init__("memotest")
        self.broken: dict[str, str] = {}

    def check_pending(self) -> None:
        """pluggy's check, as a one-line :class:`UsageError` naming the plugin, the hook
        and the hook it probably meant."""
        known = sorted(n for n in vars(self.hook) if getattr(self.hook, n).has_spec())
        for name, caller in vars(self.hook).items():
            if name.startswith("_") or caller.has_spec():
                continue
            for impl in caller.get_hookimpls():
                if impl.optionalhook:
                    continue
                import difflib

                hint = difflib.get_close_matches(name, known, n=1)
                raise UsageError(
                    f"plugin {impl.plugin_name!r} defines {name}, which is not a memotest hook"
                    + (f" (did you mean {hint[0]}?)" if hint else "")
                )


@dataclass
class LoadRequest:
    """What ``memotest_load_targets`` is asked to load (see the hook)."""

    path: Path | None
    source: str | None
    cwd: Path
    options: argparse.Namespace = field(default_factory=argparse.Namespace)


_manager: PluginManager | None = None


def manager() -> PluginManager:
    """The process's plugin manager, with built-in and installed plugins registered."""
    global _manager
    if _manager is None:
        pm = PluginManager()
        pm.add_hookspecs(hookspecs)
        for name in BUILTIN:
            pm.register(importlib.import_module(name), name=name.rsplit(".", 1)[1])
        for ep in entry_points(ENTRY_POINT_GROUP):
            if pm.get_plugin(ep.name) is not None or pm.is_blocked(ep.name):
                continue
            try:
                plugin = ep.load()
            except Exception as exc:  # any import failure is reported, not raised
                pm.broken[ep.name] = f"{type(exc).__name__}: {exc}"
                print(
                    f"memotest: warning: plugin {ep.name!r} ({ep.value}) failed to load and "
                    f"is left out: {type(exc).__name__}: {exc}",
                    file=sys.stderr,
                )
                continue
            pm.register(plugin, name=ep.name)
        for modname in filter(None, os.environ.get("MEMOTEST_PLUGINS", "").split(",")):
            modname = modname.strip()
            if pm.get_plugin(modname) is not None:
                continue
            try:
                pm.register(importlib.import_module(modname), name=modname)
            except Exception as exc:  # a plugin asked for by name must load
                raise UsageError(
                    f"MEMOTEST_PLUGINS: cannot load {modname!r}: {type(exc).__name__}: {exc}"
                ) from None
        pm.check_pending()
        _manager = pm
    return _manager


@dataclass
class Config:
    """The parsed command line and the plugin manager, handed to every hook.

    Inside another tool (tox, nox, make) there is no memotest command line: ``Config()``
    has empty ``options`` there (read them with ``getattr(config.options, NAME, None)``).
    """

    options: argparse.Namespace = field(default_factory=argparse.Namespace)
    pluginmanager: PluginManager = field(default_factory=manager)
    #: The command's warm workers (``memotest.tracer.warm.pool.WorkerPool``; a build's,
    #: None elsewhere): a plugin that runs a memoized command while loading targets (a
    #: test collection) forks it from them, as the build's targets are, with the same
    #: ``--no-preload`` and ``--whole-files``.
    worker_pool: Any = None
    #: Whether the command is a build, which finishes the records a loader deferred
    #: (``Project.deferred``): elsewhere a loader records its memoized commands at once.
    building: bool = False

    @property
    def hook(self) -> Any:
        return self.pluginmanager.hook


@contextmanager
def configured(options: argparse.Namespace) -> Iterator[Config]:
    """The command's :class:`Config`, configured: ``memotest_configure`` on entry (and
    the hook check again, for plugins registered by it), ``memotest_unconfigure`` once on
    exit, also when the command failed or ``memotest_configure`` itself raised."""
    config = Config(options)
    try:
        call("memotest_configure", config=config)
        config.pluginmanager.check_pending()
        yield config
    finally:
        call("memotest_unconfigure", config=config)


def plugin_names() -> list[str]:
    pm = manager()
    return sorted(name for name, _ in pm.list_name_plugin() if name)


def call(hook_name: str, **kwargs: Any) -> Any:
    """Calls a hook (a historic one through ``call_historic``, so that plugins registered
    later get the call too); an exception from a plugin becomes a :class:`PluginError`
    naming it (a :class:`ConfigError` or :class:`UsageError` passes through unchanged)."""
    hook = getattr(manager().hook, hook_name)
    try:
        if hook.is_historic():
            hook.call_historic(kwargs=kwargs)
            return None
        return hook(**kwargs)
    except UsageError:
        raise
    except Exception as exc:
        who = blame(exc)
        raise PluginError(
            f"plugin {who!r} failed in {hook_name}: {type(exc).__name__}: {exc}"
            if who
            else f"{hook_name} failed: {type(exc).__name__}: {exc}"
        ) from exc


class PluginError(UsageError):
    """A plugin raised: the message names the plugin and the hook."""


def blame(exc: BaseException) -> str | None:
    """The name of the registered plugin whose code raised ``exc`` (innermost frame)."""
    import traceback

    pm = manager()
    modules: dict[str, str] = {}
    for name, plugin in pm.list_name_plugin():
        modname = plugin.__name__ if isinstance(plugin, ModuleType) else type(plugin).__module__
        modules[modname] = name
    found = None
    for frame, _ in traceback.walk_tb(exc.__traceback__):
        mod = frame.f_globals.get("__name__", "")
        for modname, name in modules.items():
            root = modname.split(".")[0] if not modname.startswith("memotest.") else modname
            if mod == modname or mod.startswith(root + "."):
                found = name
    return found


def ignore_patterns(config: Config) -> tuple[str, ...]:
    """The paths plugins say are never inputs (``memotest_ignore``), in call order."""
    return tuple(p for patterns in call("memotest_ignore", config=config) for p in patterns)
