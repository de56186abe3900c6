"""Finds the compiled shim and builds the environment that loads it.

``pip install .`` compiles the shim into the package. Running from a source checkout
without installing, the shim is compiled on first use into the user's cache folder.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import xxhash

from memotest.errors import UsageError

SHIM_DIR = Path(__file__).resolve().parent.parent / "_shim"
CFLAGS = ["-shared", "-fPIC", "-O2", "-Wall", "-Wextra", "-D_GNU_SOURCE", "-pthread"]

_cached: str | None = None


def shim_path() -> str:
    """The absolute path of the shim shared object (``MEMOTEST_SHIM_LIBRARY`` overrides)."""
    global _cached
    if _cached is None:
        override = os.environ.get("MEMOTEST_SHIM_LIBRARY")
        _cached = os.path.abspath(override) if override else _locate()
        if any(c in _cached for c in " :\t\n"):
            raise UsageError(
                f"the tracer library path {_cached!r} contains a space or colon, "
                "which LD_PRELOAD cannot carry; install memotest in a path without them"
            )
    return _cached


def _locate() -> str:
    built = sorted(SHIM_DIR.glob("memotest_shim*.so"))
    if built:
        return str(built[0])
    return _build_in_cache()


def _build_in_cache() -> str:
    sources = sorted(SHIM_DIR.glob("*.c"))
    if not sources:
        raise UsageError("the tracer shim is missing; reinstall memotest (pip install memotest)")
    digest = xxhash.xxh3_64()
    for src in sorted(SHIM_DIR.glob("*.[ch]")):
        digest.update(src.name.encode())
        digest.update(src.read_bytes())
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "memotest"
    target = cache / f"memotest_shim-{digest.hexdigest()}.so"
    if target.exists():
        return str(target)
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if not cc:
        raise UsageError(
            "the tracer shim is not built and no C compiler was found; "
            "install gcc or reinstall memotest with pip"
        )
    cache.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=cache, suffix=".so")
    os.close(fd)
    proc = subprocess.run(
        [cc, *CFLAGS, "-o", tmp, *map(str, sources), "-ldl"], capture_output=True, text=True
    )
    if proc.returncode != 0:
        os.unlink(tmp)
        raise UsageError(f"building the tracer shim failed:\n{proc.stderr.strip()}")
    os.replace(tmp, target)
    return str(target)


def traced_environ(env: dict[str, str], trace_dir: str) -> dict[str, str]:
    """``env`` plus what loads the shim and points it at ``trace_dir``.
    Libraries already in ``LD_PRELOAD`` are kept."""
    lib = shim_path()
    out = dict(env)
    preload = [p for p in out.get("LD_PRELOAD", "").replace(":", " ").split() if p != lib]
    out["LD_PRELOAD"] = " ".join([*preload, lib])
    out["MEMOTEST_SHIM"] = lib
    out["MEMOTEST_TRACE_DIR"] = trace_dir
    return out
