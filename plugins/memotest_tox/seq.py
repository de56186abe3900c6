"""Runs a tox env's original commands in sequence, with tox's semantics.

This is the program memotest traces for a tox env: ``python -I -m memotest_tox.seq JSON``.
The JSON argument (part of the target's definition, so part of its key) holds the env name,
the command sets (``commands_pre``, ``commands``, ``commands_post``), ``ignore_errors``,
``commands_retry``. It behaves as tox's
``run_commands``:

- ``commands_pre`` run first; ``commands`` run only if they passed (or ``ignore_errors``);
  ``commands_post`` always run; the exit code is the first non-zero one of the three sets.
- In a set, the first failing command ends the set, unless it is ``-``-prefixed (its
  exit code is ignored) or ``ignore_errors`` is set (the set goes on and remembers the
  first failure). A ``!``-prefixed command passes when it fails. A failing command is
  tried again up to ``commands_retry`` times.
- The executable is looked up on the env's ``PATH`` (relative entries from the cwd) and run
  by its full path, as tox does; one that cannot be started fails with its ``errno``.
- A pytest command (``pytest ...``, ``python -m pytest ...``, ``coverage run -m pytest
  ...``) gets ``-p memotest_walk`` (``memotest_pytest.walk``), so that the files pytest's
  collection only walks past (``README.md``, ``CHANGES.md`` at the rootdir) are not inputs.

Unkeyed variables (the random ``PYTHONHASHSEED``, the terminal size, the numbered path of
the built package) reach this program through ``run_memoized``'s ``unkeyed_env``: passed,
not part of the key.

Keep the imports to the standard library (and ``memotest_pytest.walk``, which is): everything
imported here is an input of every tox env's record.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from typing import Any

from memotest_pytest.walk import narrowed

SETS = ("commands_pre", "commands", "commands_post")
EXEC_MODULE = "memotest_tox.exec"


def say(text: str) -> None:
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def shebang(exe: str) -> list[str] | None:
    """The interpreter line of a script, as tox's ``TOX_LIMITED_SHEBANG`` uses it."""
    try:
        with open(exe, "rb") as f:
            if f.read(2) != b"#!":
                return None
            line = f.readline()
    except OSError:
        return None
    try:
        text = line.decode("utf-8").strip()
    except UnicodeDecodeError:
        return None
    return text.split() or None


def resolve(args: list[str], cwd: str, env: Mapping[str, str]) -> list[str]:
    """``args`` with the executable replaced by the file tox would run."""
    base = args[0]
    lookup = os.path.join(cwd, base) if os.sep in base else base
    path = os.pathsep.join(os.path.join(cwd, p) for p in env.get("PATH", "").split(os.pathsep))
    exe = shutil.which(lookup, path=path)
    if exe is None:
        return list(args)
    cmd = [exe]
    if env.get("TOX_LIMITED_SHEBANG", "").strip():
        cmd = [*(shebang(exe) or []), exe]
    return [*cmd, *args[1:]]


def run_one(args: list[str], cwd: str, env: Mapping[str, str]) -> tuple[int, bool]:
    """Runs one command; returns its exit code (as a shell reports a signal: 128 + N) and
    whether it could be started at all."""
    argv, env = narrowed(resolve(args, cwd, env), env)
    try:
        proc = subprocess.Popen(argv, cwd=cwd, env=env)
    except OSError as exc:
        say(f"Exception running subprocess {exc}")
        return exc.errno or 1, False
    try:
        code = proc.wait()
    except KeyboardInterrupt:
        proc.terminate()
        proc.wait()
        raise
    return (128 - code if code < 0 else code), True


def run_set(
    spec: Mapping[str, Any], key: str, cwd: str, env: Mapping[str, str], ignore_errors: bool
) -> int:
    """tox's ``run_command_set``: the set's exit code."""
    exit_code = 0
    label = spec["env"]
    retry = int(spec.get("retry", 0))
    for at, cmd in enumerate(spec["sets"].get(key, [])):
        attempts = 1 if cmd["ignore_exit_code"] else retry + 1
        shown = cmd.get("show") or shlex.join(cmd["args"])
        for attempt in range(1, attempts + 1):
            say(f"{label}: {key}[{at}]> {shown}")
            started = time.monotonic()
            code, ran = run_one(cmd["args"], cwd, env)
            passed = (ran and code != 0) if cmd["invert_exit_code"] else code == 0
            if passed:
                break
            fail = code or 1  # a "!" command that exited 0 fails with 1, as in tox
            took = time.monotonic() - started
            say(f"{label}: exit {code} ({took:.2f} seconds) {cwd}> {shown}")
            if cmd["ignore_exit_code"]:
                say("command failed but is marked ignore outcome so handling it as success")
                break
            if attempt < attempts:
                say(f"command failed (attempt {attempt} of {attempts}), retrying ...: {shown}")
                continue
            if ignore_errors:
                exit_code = exit_code or fail
                break
            return fail
    return exit_code


def run(spec: Mapping[str, Any], cwd: str, env: Mapping[str, str]) -> int:
    """tox's ``run_commands`` for the three sets; the env's exit code."""
    ignore_errors = bool(spec.get("ignore_errors", False))
    status_pre = run_set(spec, "commands_pre", cwd, env, ignore_errors)
    status_main = 0
    try:
        if status_pre == 0 or ignore_errors:
            status_main = run_set(spec, "commands", cwd, env, ignore_errors)
    finally:
        status_post = run_set(spec, "commands_post", cwd, env, ignore_errors)
    return status_pre or status_main or status_post


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if len(argv) != 1:
        print("usage: python -m memotest_tox.seq SPEC_JSON", file=sys.stderr)
        return 2
    spec = json.loads(argv[0])
    env = dict(os.environ)
    try:
        code = run(spec, os.getcwd(), env)
    except KeyboardInterrupt:
        return 130
    return code if 0 <= code < 256 else 1


if __name__ == "__main__":
    sys.exit(main())
