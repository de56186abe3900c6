"""The key of a target: its definition and the environment it runs with.

A target runs with only the inherited variables its project passes (``pass_env``) plus its
declared ``env``; both are part of its key, so changing any of them re-runs it. Values are
kept as hashes: the store never holds an environment value in clear.
"""

from __future__ import annotations

import fnmatch
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass

import xxhash

from memotest import __version__
from memotest.config import Settings
from memotest.model import Target

#: Bumped when what a record means changes; records of another recorder are stale.
RECORDER = f"memotest-{__version__}/2"


@dataclass(frozen=True)
class TargetKey:
    def_hash: str
    definition: dict[str, object]
    env_hash: str
    env: dict[str, str | None]


def digest(data: bytes | str) -> str:
    return xxhash.xxh3_128_hexdigest(data.encode() if isinstance(data, str) else data)


def definition(target: Target) -> dict[str, object]:
    """The fields that decide what the target does (``needs`` only orders it)."""
    return {
        "command": list(target.command) if isinstance(target.command, tuple) else target.command,
        "cwd": target.cwd,
        "env": dict(target.env),
        "timeout": target.timeout,
        "tags": sorted(target.tags),
        "outputs": list(target.outputs),
        "inputs": list(target.inputs),
    }


def passed_environ(settings: Settings, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The inherited variables that match ``pass_env``."""
    env = os.environ if environ is None else environ
    pats = settings.pass_env
    return {k: v for k, v in env.items() if any(fnmatch.fnmatchcase(k, p) for p in pats)}


def env_key(
    settings: Settings, environ: Mapping[str, str] | None = None
) -> tuple[dict[str, str | None], str]:
    """The passed variables (name -> hash of the value, None when a named one is unset)
    and their hash: the same for every target of a build, so compute it once."""
    passed = passed_environ(settings, environ)
    env: dict[str, str | None] = {k: digest(v) for k, v in sorted(passed.items())}
    for pat in settings.pass_env:  # an unset literal name is part of the key too
        if not any(c in pat for c in "*?[") and pat not in env:
            env[pat] = None
    return env, digest(json.dumps(sorted(env.items())))


def target_key(
    target: Target,
    settings: Settings,
    environ: Mapping[str, str] | None = None,
    env: tuple[dict[str, str | None], str] | None = None,
) -> TargetKey:
    """``env`` is :func:`env_key`'s result when the caller already has it."""
    d = definition(target) | ({"services": sorted(settings.services)} if settings.services else {})
    values, env_hash = env if env is not None else env_key(settings, environ)
    return TargetKey(
        def_hash=digest(json.dumps(d, sort_keys=True)),
        definition=d,
        env_hash=env_hash,
        env=dict(values),
    )


def run_environ(
    target: Target, settings: Settings, environ: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The environment the target's command starts with (the tracer adds its own)."""
    env = passed_environ(settings, environ)
    env.update(target.env)
    return env
