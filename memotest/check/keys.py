"""The key of a target: its definition and the environment it runs with.

A target runs with only the inherited variables its project passes (``pass_env``) plus its
declared ``env``; both are part of its key, so changing any of them re-runs it. Values are
kept as hashes: the store never holds an environment value in clear.

The environment is more than the variables: a process inherits state that a test can see
(:func:`process_state`). What memotest sets to one value for every run is not keyed:
stdin is ``/dev/null``, stdout and stderr the log, no other file descriptor is open
(``close_fds``), the run starts a session of its own (so has no controlling terminal),
``TMPDIR`` is private, the signals Python ignores for itself (``SIGPIPE``, ``SIGXFSZ``)
are restored to their default, and the variables ``pass_env`` leaves out (``LANG``,
``LC_*``, ``TZ``) are unset. The rest of what it inherits is keyed, under names that start
with ``=`` (no variable's name can): the umask, every resource limit, the signals ignored
and blocked, the user, group and supplementary group ids, the nice value, the
capabilities and ``no_new_privs``, the execution domain (``personality``), the machine,
and per target the real path of its working folder (what ``os.getcwd()`` returns: the
same path through a retargeted symbolic link is another folder). These values are not
secrets and are kept in clear.

The signals a terminal session ignores (``SIGHUP`` under ``nohup``, ``SIGINT`` and
``SIGQUIT`` in a background job) are set to their default for every run too, and so are
not keyed: :mod:`memotest.run.signals`.

Portable keys: the same target in a copy of the project at another path has the same key.
Every path in the key is taken under the project's roots (:mod:`memotest.world.roots`): the
folder (``@project/sub``), the paths in the command, the declared env and inputs, and in
the values of the passed variables (``PATH=@venv/bin:/usr/bin``) before they are hashed,
each with its ``..`` resolved first where that is sound (``$PWD/../elsewhere`` is outside
the project: absolute, :func:`memotest.world.roots.sound_normpath`); the roots' names are keyed
(``=roots``). The ids stay keyed as they are (a test can read
them, and root skips permission checks): see ``docs/limits.md``.
"""

from __future__ import annotations

import fnmatch
import json
import os
import resource
import signal
from collections.abc import Mapping
from dataclasses import dataclass

import xxhash

from memotest.load.config import Settings
from memotest.model import Target
from memotest.world.roots import Roots


def _same(text: str) -> str:
    """No roots (a caller that names no project): paths stay as they are."""
    return text


@dataclass(frozen=True)
class TargetKey:
    def_hash: str
    definition: dict[str, object]
    env_hash: str
    env: dict[str, str | None]
    #: The settings that may shape what a record holds (:func:`memotest.check.shaping.granted`);
    #: None when unknown (records of another tool, taken as recorded).
    shaping: frozenset[str] | None = None


def digest(data: bytes | str) -> str:
    """xxh3-128 of ``data``; text as the bytes it came from (a variable's value or a path
    that is not UTF-8, held with lone surrogates, is hashed as its bytes: ``os.fsencode``;
    UTF-8 text as ever, so keys do not change)."""
    if isinstance(data, str):
        try:
            data = data.encode("utf-8", "surrogateescape")
        except UnicodeEncodeError:  # a lone surrogate no file name decodes to
            data = data.encode("utf-8", "surrogatepass")
    return xxhash.xxh3_128_hexdigest(data)


def definition(target: Target, roots: Roots | None = None) -> dict[str, object]:
    """The fields that decide what the target does (``needs`` only orders it), with the
    paths under a root in them in portable form (:meth:`Roots.portable_text`)."""
    text = roots.portable_text if roots is not None else _same
    command = target.command
    out: dict[str, object] = {
        "command": text(command) if isinstance(command, str) else [text(w) for w in command],
        "cwd": text(target.cwd),
        "env": {k: text(v) for k, v in target.env},
        "timeout": target.timeout,
        "tags": sorted(target.tags),
        "outputs": list(target.outputs),
        "inputs": [text(p) for p in target.inputs],
    }
    if target.scratch:  # only when any: the keys of targets without them stay as they were
        out["scratch"] = [text(p) for p in target.scratch]
    return out


def passed_environ(settings: Settings, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The inherited variables that match ``pass_env``."""
    env = os.environ if environ is None else environ
    pats = settings.pass_env
    return {k: v for k, v in env.items() if any(fnmatch.fnmatchcase(k, p) for p in pats)}


#: The signals Python ignores for itself and ``subprocess`` restores in the child, and the
#: real-time signals below ``SIGRTMIN`` that the C library keeps for itself (glibc's 32 and
#: 33: it installs their handlers at every process's start, and their disposition in this
#: process changes once it starts a thread, so keying them made one process's key change).
_RESTORED = {
    int(getattr(signal, n)) for n in ("SIGPIPE", "SIGXFZ", "SIGXFSZ") if hasattr(signal, n)
} | set(range(32, int(signal.SIGRTMIN)))

#: What of ``/proc/self/status`` a target inherits (the capability sets, ``no_new_privs``
#: and the seccomp mode); ``SigIgn`` is read for the ignored signals.
_STATUS = ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb", "NoNewPrivs", "Seccomp")


def _signals(mask: int) -> str:
    return ",".join(str(n) for n in range(1, 65) if mask >> (n - 1) & 1 and n not in _RESTORED)


def process_state() -> dict[str, str]:
    """What this process passes on to the targets it starts besides the variables, and a
    test can see (``=NAME`` -> value in clear): see the module's docstring."""
    state: dict[str, str] = {}
    for name in sorted(n for n in dir(resource) if n.startswith("RLIMIT_")):
        try:
            soft, hard = resource.getrlimit(getattr(resource, name))
        except (OSError, ValueError):
            continue
        state[f"={name.lower()}"] = f"{soft}:{hard}"
    status: dict[str, str] = {}
    try:
        with open("/proc/self/status") as f:
            for line in f:
                field_name, _, value = line.partition(":")
                status[field_name] = value.strip()
    except OSError:
        pass
    if "Umask" in status:  # Linux 4.7 on: read without changing it (threads may be running)
        state["=umask"] = oct(int(status["Umask"], 8))
    else:
        umask = os.umask(0o022)
        os.umask(umask)
        state["=umask"] = oct(umask)
    ignored = int(status.get("SigIgn", "0"), 16)
    blocked = signal.pthread_sigmask(signal.SIG_BLOCK, [])
    state["=signals-ignored"] = _signals(ignored)
    state["=signals-blocked"] = _signals(sum(1 << (int(s) - 1) for s in blocked))
    ids = (os.getuid(), os.geteuid(), os.getgid(), os.getegid())
    state["=ids"] = "uid={} euid={} gid={} egid={}".format(*ids)
    state["=groups"] = ",".join(map(str, sorted(os.getgroups())))
    state["=nice"] = str(os.getpriority(os.PRIO_PROCESS, 0))
    state["=capabilities"] = " ".join(f"{k}={status[k]}" for k in _STATUS if k in status)
    try:
        with open("/proc/self/personality") as f:
            state["=personality"] = f.read().strip()
    except OSError:
        pass
    state["=machine"] = os.uname().machine
    return state


def env_key(
    settings: Settings, environ: Mapping[str, str] | None = None, roots: Roots | None = None
) -> tuple[dict[str, str | None], str]:
    """The passed variables (name -> hash of the value in portable form, None when a
    named one is unset), the inherited process state (:func:`process_state`) and the
    names of the roots (``=roots``), and their hash: the same for every target of a
    build, so compute it once."""
    passed = passed_environ(settings, environ)
    text = roots.portable_text if roots is not None else _same
    env: dict[str, str | None] = {k: digest(text(v)) for k, v in sorted(passed.items())}
    env.update(process_state())
    if roots is not None:
        env["=roots"] = ",".join(roots.names())
    for pat in settings.pass_env:  # an unset literal name is part of the key too
        if not any(c in pat for c in "*?[") and pat not in env:
            env[pat] = None
    return env, digest(json.dumps(sorted(env.items())))


def target_key(
    target: Target,
    settings: Settings,
    environ: Mapping[str, str] | None = None,
    env: tuple[dict[str, str | None], str] | None = None,
    shaping: frozenset[str] | None = None,
    roots: Roots | None = None,
) -> TargetKey:
    """``env`` is :func:`env_key`'s result (with the same ``roots``) when the caller
    already has it; ``shaping`` is :func:`memotest.check.shaping.granted`'s; ``roots`` the
    project's (:mod:`memotest.world.roots`), which make the key the same at another path."""
    d = definition(target, roots)
    if settings.services:
        d["services"] = sorted(settings.services)
    values, env_hash = env if env is not None else env_key(settings, environ, roots)
    values = dict(values)
    # The folder the target starts in, as ``os.getcwd()`` will name it, under its root.
    cwd = os.path.realpath(target.cwd)
    values["=cwd"] = roots.portable(cwd) if roots is not None else cwd
    return TargetKey(
        def_hash=digest(json.dumps(d, sort_keys=True)),
        definition=d,
        env_hash=digest(env_hash + "\0" + values["=cwd"]),
        env=values,
        shaping=shaping,
    )


def run_environ(
    target: Target, settings: Settings, environ: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The environment the target's command starts with (the tracer adds its own)."""
    env = passed_environ(settings, environ)
    env.update(target.env)
    return env
