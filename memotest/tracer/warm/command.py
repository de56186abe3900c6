"""The warm worker's command line: the modules of ``memotest/worker/`` and of plugins.

The worker runs in the target's interpreter, which need not be able to import memotest.
So memotest reads the worker's modules (``memotest/worker/``, and the worker-side modules
plugins name through ``memotest_worker_modules``) and passes their sources on the command
line, each after its name and path, and each compiled by memotest's interpreter:
``boot.py``, run with ``-c``, makes them modules (``memotest/worker/__init__.py``), from
that code when the target's interpreter is of the same magic number (compiling them took
each worker ~40 ms), else from the sources. The worker reads none of these files itself:
they are not inputs of its runs.
"""

from __future__ import annotations

import functools
import importlib.machinery
import importlib.util
import json
import marshal
import os
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import memotest.worker
from memotest.load import plugins

#: The worker's own modules, each after those it imports.
MODULES = (
    "bytecode",
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


#: The most text of compiled modules passed on a worker's command line (Linux takes
#: 128 KiB an argument and about 2 MiB for them all, the environment included).
MOST_CODE = 1 << 20
MOST_ONE = 100_000
#: What ``boot.py`` checks before it runs the code compiled here: this interpreter's.
COMPILED = f"compiled:{importlib.util.MAGIC_NUMBER.hex()}:{sys.flags.optimize}"


@functools.cache
def _source(path: str) -> str:
    return Path(path).read_text(encoding="utf-8")


@functools.cache
def _compiled(path: str, source: str) -> str:
    """``source`` (the file ``path``) compiled as ``boot.py`` compiles it, as ``marshal``
    escaped (:func:`escaped`; as ``os.fsdecode`` makes it a ``str``, which the command line
    gives back as those bytes; empty if too long for one argument): a worker of the same interpreter
    runs it instead of compiling each of its modules at every start. Python's own cache
    of compiled files (``__pycache__``, valid while the file's mtime and size are those it
    was compiled from) spares memotest compiling them too."""
    name = "_memotest_worker." + Path(path).stem
    code = importlib.machinery.SourceFileLoader(name, path).get_code(name)
    data = escaped(marshal.dumps(code))
    return os.fsdecode(data) if len(data) <= MOST_ONE else ""


def escaped(data: bytes) -> bytes:
    """``data`` as one argument of a command line, which holds no NUL byte: each
    ``\\x01`` as ``\\x01\\x02``, each NUL as ``\\x01\\x03`` (``boot.py``'s ``unescaped``;
    the worker's Python gives the other bytes back with ``os.fsencode``)."""
    return data.replace(b"\x01", b"\x01\x02").replace(b"\x00", b"\x01\x03")


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
    modules = [(name, path, _source(path)) for name, path in [*loaded, *extensions]]
    codes = [_compiled(path, source) for _, path, source in modules]
    if sum(map(len, codes)) > MOST_CODE:
        codes = []
    if codes:
        argv.append(COMPILED)
    for i, module in enumerate(modules):
        argv += [*module, codes[i]] if codes else module
    return argv
