"""Built-in plugin: loads ``memotest.toml`` / ``memotest.yaml`` targets files."""

from __future__ import annotations

from memotest import config
from memotest.config import Project
from memotest.hookspecs import hookimpl
from memotest.plugins import LoadRequest

SUFFIXES = (".toml", ".yaml", ".yml")


@hookimpl(tryfirst=True)
def memotest_load_targets(request: LoadRequest) -> Project | None:
    if request.source not in (None, "memotest", "toml", "yaml"):
        return None
    if request.path is not None:
        if request.path.suffix not in SUFFIXES and request.source is None:
            return None
        return config.load(request.path)
    try:
        path = config.find_targets_file(request.cwd)
    except config.ConfigError:
        if request.source is None:
            return None  # let other plugins auto-detect their files
        raise
    return config.load(path)
