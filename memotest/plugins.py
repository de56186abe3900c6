"""The plugin manager: the core's own plugins, then every ``memotest`` entry point.

As in pytest, the core is plugins too: the targets-file loader, the terminal reporter and
the JSON/JUnit reports are registered here as built-in plugins, and the adapters for tox,
nox, make, BUILD files and pytest are found through the ``memotest`` entry-point group
like any third-party plugin. A plugin that fails to import is reported by name and left
out; it is an error only when it was the one asked for (``--from NAME``). Modules named
in ``MEMOTEST_PLUGINS`` (comma-separated, importable) are registered too, as pytest's
``PYTEST_PLUGINS``: the way to try a plugin without packaging it.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import traceback
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from pathlib import Path
from types import ModuleType
from typing import Any

import pluggy

from memotest import hookspecs
from memotest.errors import ConfigError, UsageError

BUILTIN = (
    "memotest.builtin.targets_file",
    "memotest.builtin.terminal",
    "memotest.builtin.reports",
    "memotest.builtin.readers",
)
ENTRY_POINT_GROUP = "memotest"


@dataclass
class LoadRequest:
    """What ``memotest_load_targets`` is asked to load (see the hook)."""

    path: Path | None
    source: str | None
    cwd: Path
    options: argparse.Namespace = field(default_factory=argparse.Namespace)


@dataclass
class Config:
    """The parsed command line and the plugin manager, handed to hooks."""

    options: argparse.Namespace
    pluginmanager: pluggy.PluginManager
    broken: dict[str, str] = field(default_factory=dict)  # plugin name -> import error

    @property
    def hook(self) -> Any:
        return self.pluginmanager.hook


class PluginError(UsageError):
    """A plugin raised: the message names the plugin and the hook."""


_manager: pluggy.PluginManager | None = None
_broken: dict[str, str] = {}


def manager() -> pluggy.PluginManager:
    """The process's plugin manager, with built-in and installed plugins registered."""
    global _manager
    if _manager is None:
        pm = pluggy.PluginManager("memotest")
        pm.add_hookspecs(hookspecs)
        for name in BUILTIN:
            pm.register(importlib.import_module(name), name=name.rsplit(".", 1)[1])
        for ep in entry_points(group=ENTRY_POINT_GROUP):
            if pm.get_plugin(ep.name) is not None or pm.is_blocked(ep.name):
                continue
            try:
                plugin = ep.load()
            except Exception as exc:  # any import failure is reported, not raised
                _broken[ep.name] = f"{type(exc).__name__}: {exc}"
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
        _manager = pm
    return _manager


def broken_plugins() -> dict[str, str]:
    manager()
    return dict(_broken)


def plugin_names() -> list[str]:
    pm = manager()
    return sorted(name for name, _ in pm.list_name_plugin() if name)


def call(hook_name: str, **kwargs: Any) -> Any:
    """Calls a hook; an exception from a plugin becomes a :class:`PluginError` naming it
    (a :class:`ConfigError` or :class:`UsageError` passes through unchanged)."""
    hook = getattr(manager().hook, hook_name)
    try:
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


def blame(exc: BaseException) -> str | None:
    """The name of the registered plugin whose code raised ``exc`` (innermost frame)."""
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


def load_project(options: argparse.Namespace, cwd: Path | None = None) -> Any:
    """Loads the targets named by ``-f``/``--from`` (or found in ``cwd``) via plugins."""
    source = getattr(options, "source", None)
    path = Path(options.file) if getattr(options, "file", None) else None
    if source and source in _broken:
        raise UsageError(f"--from {source}: the plugin failed to load: {_broken[source]}")
    request = LoadRequest(path=path, source=source, cwd=cwd or Path.cwd(), options=options)
    project = call("memotest_load_targets", request=request)
    if project is None:
        if source:
            known = ", ".join(plugin_names())
            raise UsageError(f"--from {source}: no plugin loads that source (plugins: {known})")
        if path is not None:
            raise ConfigError(f"{path}: no plugin knows how to read this file")
        raise ConfigError(
            f"no memotest.toml found in {request.cwd} or any parent folder, and no plugin "
            "recognised a project here (create memotest.toml, or name a file with -f FILE)"
        )
    return project
