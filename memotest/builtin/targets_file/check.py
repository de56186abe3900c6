"""Checks a targets file's data and makes the :class:`Project`: settings, each target's
fields, ``foreach`` groups, and ``needs`` (every need defined, no cycle).

Every mistake is a :class:`ConfigError` naming the file, the line where it can be found and
the fix; nothing runs when the file is wrong.
"""

from __future__ import annotations

import os
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

from memotest.builtin.targets_file import foreach
from memotest.builtin.targets_file.syntax import Lines
from memotest.errors import ConfigError
from memotest.load.config import Project, Settings, find_cycle, parse_size, target_problems
from memotest.model import SourceLocation, Target
from memotest.world.roots import load_roots
from memotest.world.services import check_services

SETTINGS_KEYS = {
    "jobs",
    "pass_env",
    "ignore",
    "services",
    "roots",
    "max_size",
    "remote",
    "remote_timeout",
    "remote_max_answer",
    "select",
}
TARGET_KEYS = {
    "command",
    "cwd",
    "env",
    "needs",
    "timeout",
    "tags",
    "outputs",
    "inputs",
    "foreach",
    "description",
}
NAME_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.\-/+@]*$")


class Checker:
    """Turns a targets file's data into a :class:`Project`, or the first mistake into a
    :class:`ConfigError` naming the line."""

    def __init__(self, path: Path, data: dict[str, Any], lines: Lines) -> None:
        self.path = path
        self.root = path.parent
        self.data = data
        self.lines = lines
        self.targets: dict[str, Target] = {}
        self.groups: dict[str, list[str]] = {}  # foreach group -> its targets

    def where(self, *keys: str) -> str:
        for n in range(len(keys), 0, -1):
            line = self.lines.get(tuple(keys[:n]))
            if line:
                return f"{self.path}:{line}"
        return str(self.path)

    def fail(self, keys: tuple[str, ...], message: str) -> ConfigError:
        return ConfigError(f"{self.where(*keys)}: {message}")

    def build(self) -> Project:
        unknown = set(self.data) - {"settings", "targets"}
        for key in sorted(unknown):
            raise self.fail(
                (key,), f"unknown top-level key {key!r} (expected [settings] and [targets.NAME])"
            )
        settings = self.settings(self.data.get("settings", {}))
        targets = self.data.get("targets")
        if targets is None:
            raise self.fail((), "no targets defined (add a [targets.NAME] table with a command)")
        if not isinstance(targets, dict):
            raise self.fail(("targets",), "'targets' must be a table of named targets")
        for name, spec in targets.items():
            self.target(str(name), spec)
        self.check_needs()
        return Project(self.path, self.root, settings, self.targets)

    def settings(self, raw: Any) -> Settings:
        keys = ("settings",)
        if not isinstance(raw, dict):
            raise self.fail(keys, "[settings] must be a table")
        for key in raw:
            if key not in SETTINGS_KEYS:
                raise self.fail(
                    (*keys, key),
                    f"unknown setting {key!r} (known: {', '.join(sorted(SETTINGS_KEYS))})",
                )
        s = Settings()
        if "jobs" in raw:
            jobs = raw["jobs"]
            if not isinstance(jobs, int) or isinstance(jobs, bool) or jobs < 1:
                raise self.fail((*keys, "jobs"), "jobs must be a whole number of at least 1")
            s.jobs = jobs
        if "pass_env" in raw:
            s.pass_env = tuple(self.str_list(raw["pass_env"], (*keys, "pass_env")))
        if "ignore" in raw:
            s.ignore += tuple(self.str_list(raw["ignore"], (*keys, "ignore")))
        if "services" in raw:
            s.services = tuple(self.str_list(raw["services"], (*keys, "services")))
            if bad := check_services(s.services):
                raise self.fail((*keys, "services"), bad)
        if "roots" in raw:
            if not isinstance(raw["roots"], dict):
                raise self.fail(
                    (*keys, "roots"), 'roots must be a table, like {venv = "$VIRTUAL_ENV"}'
                )
            try:
                s.roots = load_roots(raw["roots"], self.root)
            except ValueError as exc:
                raise self.fail((*keys, "roots"), str(exc)) from None
        if "max_size" in raw:
            size = parse_size(raw["max_size"])
            if size is None:
                raise self.fail(
                    (*keys, "max_size"),
                    'max_size must be a size, like "2 GiB" or "500 MB", or a number of bytes',
                )
            s.max_size = size
        if "remote" in raw:
            if not isinstance(raw["remote"], str):
                raise self.fail((*keys, "remote"), "remote must be a URL (http, https, redis)")
            s.remote = raw["remote"] or None
        if "remote_timeout" in raw:
            t = raw["remote_timeout"]
            if isinstance(t, bool) or not isinstance(t, (int, float)) or not 0 < t < 1e6:
                raise self.fail((*keys, "remote_timeout"), "remote_timeout must be seconds > 0")
            s.remote_timeout = float(t)
        if "remote_max_answer" in raw:
            size = parse_size(raw["remote_max_answer"])
            if size is None:
                raise self.fail(
                    (*keys, "remote_max_answer"),
                    'remote_max_answer must be a size, like "64 MiB", or a number of bytes',
                )
            s.remote_max_answer = size
        if "select" in raw:
            if raw["select"] not in ("tests", "files"):
                raise self.fail((*keys, "select"), 'select must be "tests" or "files"')
            s.select = raw["select"]
        return s

    def str_list(self, value: Any, keys: tuple[str, ...]) -> list[str]:
        if isinstance(value, str) or not isinstance(value, list):
            raise self.fail(keys, f'{keys[-1]} must be a list of strings, like ["a", "b"]')
        for item in value:
            if not isinstance(item, str):
                raise self.fail(keys, f"{keys[-1]} must be a list of strings; found {item!r}")
        return list(value)

    def target(self, name: str, spec: Any) -> None:
        keys = ("targets", name)
        if not NAME_RE.fullmatch(name):
            raise self.fail(
                keys, f"target name {name!r} is not valid (use letters, digits and _ . - / + @)"
            )
        if not isinstance(spec, dict):
            raise self.fail(keys, f"target {name!r} must be a table with at least a command")
        for key in spec:
            if key not in TARGET_KEYS:
                hint = _closest(key, TARGET_KEYS)
                raise self.fail(
                    (*keys, key),
                    f"target {name!r}: unknown key {key!r}"
                    + (f" (did you mean {hint!r}?)" if hint else "")
                    + f"; known keys: {', '.join(sorted(TARGET_KEYS))}",
                )
        if "command" not in spec:
            raise self.fail(keys, f'target {name!r} has no command (add command = "...")')
        command = spec["command"]
        if isinstance(command, list):
            if not command or not all(isinstance(c, str) for c in command):
                raise self.fail(
                    (*keys, "command"), f"target {name!r}: a command list must hold strings"
                )
        elif not isinstance(command, str) or not command.strip():
            raise self.fail(
                (*keys, "command"), f"target {name!r}: command must be a string or a list"
            )
        cwd_raw = spec.get("cwd", ".")
        if not isinstance(cwd_raw, str):
            raise self.fail((*keys, "cwd"), f"target {name!r}: cwd must be a string")
        cwd = os.path.normpath(os.path.join(self.root, cwd_raw))
        if os.path.exists(cwd) and not os.path.isdir(cwd):
            raise self.fail(
                (*keys, "cwd"), f"target {name!r}: cwd {cwd_raw!r} is a file, not a folder"
            )
        env = spec.get("env", {})
        if not isinstance(env, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in env.items()
        ):
            raise self.fail(
                (*keys, "env"),
                f'target {name!r}: env must map names to strings, like {{ A = "1" }}',
            )
        needs = self.str_list(spec.get("needs", []), (*keys, "needs"))
        timeout = spec.get("timeout")
        if timeout is not None and (
            isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0
        ):
            raise self.fail((*keys, "timeout"), f"target {name!r}: timeout must be seconds > 0")
        try:
            timeout = float(timeout) if timeout is not None else None
        except OverflowError:
            raise self.fail(
                (*keys, "timeout"), f"target {name!r}: timeout {timeout} is too large"
            ) from None
        tags = frozenset(self.str_list(spec.get("tags", []), (*keys, "tags")))
        outputs = tuple(self.str_list(spec.get("outputs", []), (*keys, "outputs")))
        inputs = tuple(self.str_list(spec.get("inputs", []), (*keys, "inputs")))
        for path in inputs:
            if os.path.isabs(path) or ".." in path.replace(os.sep, "/").split("/"):
                raise self.fail(
                    (*keys, "inputs"),
                    f"target {name!r}: declared input {path!r} is outside the target's "
                    "folder: name files below it, without '..' (set cwd higher instead)",
                )
        if name in needs:
            raise self.fail(
                (*keys, "needs"), f"target {name!r} needs itself (remove {name!r} from needs)"
            )
        loc = SourceLocation(str(self.path), self.lines.get(keys))
        base = dict(
            cwd=cwd,
            env=tuple(sorted(env.items())),
            needs=tuple(needs),
            timeout=timeout,
            tags=tags,
            outputs=outputs,
            inputs=inputs,
            source=loc,
        )
        pattern = spec.get("foreach")
        if pattern is None:
            self.add(keys, Target(name=name, command=_cmd(command), **base))
            return
        if not isinstance(pattern, str) or not pattern or "\0" in pattern:
            raise self.fail((*keys, "foreach"), f"target {name!r}: foreach must be a glob string")
        if not foreach.has_placeholder(command):
            raise self.fail(
                (*keys, "command"),
                f"target {name!r}: a foreach target's command must contain {{path}}, "
                "where each matching file goes",
            )
        commands = foreach.expand(command, pattern, str(self.root))
        if not commands:
            raise self.fail(
                (*keys, "foreach"), f"target {name!r}: foreach {pattern!r} matches no file"
            )
        for rel, cmd in commands.items():
            self.add(keys, Target(name=f"{name}:{rel}", command=cmd, **base), group=name)

    def add(self, keys: tuple[str, ...], target: Target, group: str | None = None) -> None:
        for key, problem in target_problems(target):
            raise self.fail((*keys, key), f"target {target.name!r}: {problem}")
        if target.name in self.targets:
            raise self.fail(keys, f"duplicate target name {target.name!r}")
        self.targets[target.name] = target
        if group:
            self.groups.setdefault(group, []).append(target.name)

    def check_needs(self) -> None:
        # A need may name a foreach group: it stands for every target of the group.
        resolved: dict[str, Target] = {}
        for name, t in self.targets.items():
            needs: list[str] = []
            for need in t.needs:
                if need in self.targets:
                    needs.append(need)
                elif need in self.groups:
                    needs.extend(n for n in self.groups[need] if n != name)
                else:
                    group = name.split(":", 1)[0]
                    raise self.fail(
                        ("targets", group, "needs"),
                        f"target {name!r} needs {need!r}, which is not defined",
                    )
            resolved[name] = replace(t, needs=tuple(dict.fromkeys(needs)))
        self.targets = resolved
        cycle = find_cycle({n: t.needs for n, t in self.targets.items()})
        if cycle:
            group = cycle[0].split(":", 1)[0]
            raise self.fail(
                ("targets", group, "needs"),
                f"needs form a cycle: {' -> '.join(cycle)} (remove one of these needs)",
            )


def _cmd(command: str | list[str]) -> str | tuple[str, ...]:
    return command if isinstance(command, str) else tuple(command)


def _closest(key: str, known: set[str]) -> str | None:
    import difflib  # only for a mistake: every command loads this plugin

    hits = difflib.get_close_matches(key, sorted(known), n=1, cutoff=0.6)
    return hits[0] if hits else None
