"""The warm worker's command line: the modules of ``memotest/worker/`` and of plugins.

The worker runs in the target's interpreter, which need not be able to import memotest.
So memotest reads the worker's modules (``memotest/worker/``, and the worker-side modules
plugins name through ``memotest_worker_modules``) and passes their sources on the command
line, each after its name and path; ``boot.py``, run with ``-c``, makes them modules
(``memotest/worker/__init__.py``). The worker reads none of these files itself: they are
not inputs of its runs.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from types import ModuleType
from typing import Any

import memotest.worker
from memotest.load import plugins

#: The worker's own modules, each after those it imports.
MODULES = (
    "first_line",
    "codes",
    "class_lines",
    "call_lines",
    "defaults_seen",
    "audit",
    "extensions",
    "interpreter",
    "listings",
    "sections",
    "preload",
    "monitored",
    "code_watch",
    "prepared_code",
    "phases",
    "child",
    "untimed",
    "serve",
)
HERE = Path(memotest.worker.__file__).parent


@functools.cache
def _source(path: str) -> str:
    return Path(path).read_text(encoding="utf-8")


def extension_modules(config: Any = None) -> list[ModuleType]:
    """The worker-side modules the plugins ship (``memotest_worker_modules``)."""
    found = plugins.call("memotest_worker_modules", config=config)
    return [module for modules in found for module in modules]


def worker_argv(python: str, cfg: dict[str, Any], listings: bool, config: Any = None) -> list[str]:
    """The command that starts a worker of ``python`` with the start-up config ``cfg``
    (``serve.py``); with ``listings``, its runs report what they listed, what their
    readers opened and the code they executed."""
    loaded = [(name, str(HERE / f"{name}.py")) for name in MODULES]
    extensions = [(m.__name__, str(m.__file__)) for m in extension_modules(config)]
    cfg = dict(cfg, extensions=[name for name, _ in extensions])
    argv = [python, "-c", _source(str(HERE / "boot.py")), json.dumps(cfg)]
    argv.append("listings" if listings else "whole")
    for name, path in [*loaded, *extensions]:
        argv += [name, path, _source(path)]
    return argv
