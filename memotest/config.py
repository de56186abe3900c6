"""Loads a targets file (``memotest.toml`` or ``memotest.yaml``) into :class:`Target` objects.

Every mistake is a :class:`ConfigError` naming the file, the line where it can be found and
the fix; nothing runs when the file is wrong.
"""

from __future__ import annotations

import glob
import os
import re
import shlex
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from memotest.errors import ConfigError
from memotest.model import SourceLocation, Target

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

FILE_NAMES = ("memotest.toml", "memotest.yaml", "memotest.yml")

#: Inherited variables that are passed to targets (and part of their key) by default.
DEFAULT_PASS_ENV = (
    "PATH",
    "HOME",
    "USER",
    "LANG",
    "LANGUAGE",
    "LC_*",
    "TZ",
    "TERM",
    "PYTHON*",
    "VIRTUAL_ENV",
)
#: Paths that are never inputs, whatever the targets file says.
DEFAULT_IGNORE = ("**/__pycache__/**", "**/.pytest_cache/**", "**/.memotest/**")

KNOWN_TAGS = ("exclusive", "no-cache", "flaky")
SETTINGS_KEYS = {"jobs", "pass_env", "ignore"}
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


@dataclass
class Settings:
    jobs: int | None = None
    pass_env: tuple[str, ...] = DEFAULT_PASS_ENV
    ignore: tuple[str, ...] = DEFAULT_IGNORE


@dataclass
class Project:
    """A loaded targets file: its path, its folder (the project root), settings, targets."""

    path: Path
    root: Path
    settings: Settings
    targets: dict[str, Target] = field(default_factory=dict)
    #: A loader's own names (``//pkg/...``, a test suite, ``test`` for ``make:test``):
    #: called for each name on the command line, it returns the target names the name
    #: stands for, or None to leave it to the core's rules (exact name, group, glob).
    resolve: Callable[[str], list[str] | None] | None = None
    #: What a build names when it names nothing (None: every target).
    default: list[str] | None = None


def find_targets_file(start: Path) -> Path:
    """The targets file in ``start`` or its nearest parent that has one."""
    for folder in (start, *start.parents):
        for name in FILE_NAMES:
            candidate = folder / name
            if candidate.is_file():
                return candidate
    raise ConfigError(
        f"no memotest.toml found in {start} or any parent folder "
        "(create one, or name a file with -f FILE)"
    )


def load(path: Path) -> Project:
    """Parses and checks the targets file at ``path``."""
    path = path.resolve()
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read: {exc}") from None
    if path.suffix in (".yaml", ".yml"):
        data, lines = _parse_yaml(path, text)
    else:
        data, lines = _parse_toml(path, text)
    return _Builder(path, text, data, lines).build()


def _parse_toml(path: Path, text: str) -> tuple[dict[str, Any], dict[tuple[str, ...], int]]:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        msg = str(exc)
        m = re.search(r"\(at line (\d+), column \d+\)", msg)
        line = m.group(1) if m else None
        msg = re.sub(r"\s*\(at line \d+, column \d+\)", "", msg)
        where = f"{path}:{line}" if line else str(path)
        raise ConfigError(f"{where}: TOML syntax error: {msg}") from None
    return data, _toml_lines(text)


def _toml_lines(text: str) -> dict[tuple[str, ...], int]:
    """Best-effort line numbers of tables and keys (tomllib does not report them)."""
    lines: dict[tuple[str, ...], int] = {}
    table: tuple[str, ...] = ()
    header = re.compile(r"^\s*\[\s*([^\]]+?)\s*\]\s*(#.*)?$")
    key = re.compile(r"^\s*(\"[^\"]+\"|'[^']+'|[A-Za-z0-9_\-]+)\s*=")
    for no, line in enumerate(text.splitlines(), 1):
        m = header.match(line)
        if m:
            table = tuple(_unquote(p) for p in _split_dotted(m.group(1)))
            lines.setdefault(table, no)
            continue
        m = key.match(line)
        if m:
            lines.setdefault((*table, _unquote(m.group(1))), no)
    return lines


def _split_dotted(s: str) -> list[str]:
    return [p.strip() for p in re.findall(r"\"[^\"]*\"|'[^']*'|[^.]+", s)]


def _unquote(s: str) -> str:
    s = s.strip()
    if len(s) >= 2 and s[0] == s[-1] and s[0] in "\"'":
        return s[1:-1]
    return s


class _UniqueKeyLoader(yaml.SafeLoader):
    pass


def _parse_yaml(path: Path, text: str) -> tuple[dict[str, Any], dict[tuple[str, ...], int]]:
    lines: dict[tuple[str, ...], int] = {}
    try:
        node = yaml.compose(text, Loader=_UniqueKeyLoader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark else str(path)
        problem = getattr(exc, "problem", None) or str(exc)
        raise ConfigError(f"{where}: YAML syntax error: {problem}") from None
    if node is None:
        return {}, lines
    _yaml_lines(path, node, (), lines)
    data = _UniqueKeyLoader(text).construct_document(node)
    if not isinstance(data, dict):
        raise ConfigError(f"{path}:1: the top level must be a mapping with a 'targets' key")
    return data, lines


def _yaml_lines(path: Path, node: yaml.Node, prefix: tuple[str, ...], out: dict) -> None:
    if isinstance(node, yaml.MappingNode):
        seen: set[str] = set()
        for k, v in node.value:
            name = str(k.value)
            if name in seen:
                raise ConfigError(
                    f"{path}:{k.start_mark.line + 1}: duplicate key {name!r}"
                    + (f" in {'.'.join(prefix)}" if prefix else "")
                    + " (each name may appear once)"
                )
            seen.add(name)
            out.setdefault((*prefix, name), k.start_mark.line + 1)
            _yaml_lines(path, v, (*prefix, name), out)


class _Builder:
    def __init__(self, path: Path, text: str, data: dict[str, Any], lines: dict) -> None:
        self.path = path
        self.root = path.parent
        self.data = data
        self.lines = lines
        self.targets: dict[str, Target] = {}

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
            s.ignore = DEFAULT_IGNORE + tuple(self.str_list(raw["ignore"], (*keys, "ignore")))
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
        if not NAME_RE.match(name):
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
        tags = frozenset(self.str_list(spec.get("tags", []), (*keys, "tags")))
        outputs = tuple(self.str_list(spec.get("outputs", []), (*keys, "outputs")))
        inputs = tuple(self.str_list(spec.get("inputs", []), (*keys, "inputs")))
        loc = SourceLocation(str(self.path), self.lines.get(keys))
        base = dict(
            cwd=cwd,
            env=tuple(sorted(env.items())),
            needs=tuple(needs),
            timeout=float(timeout) if timeout is not None else None,
            tags=tags,
            outputs=outputs,
            inputs=inputs,
            source=loc,
        )
        pattern = spec.get("foreach")
        if pattern is None:
            self.add(keys, Target(name=name, command=_cmd(command), **base))
            return
        if not isinstance(pattern, str) or not pattern:
            raise self.fail((*keys, "foreach"), f"target {name!r}: foreach must be a glob string")
        parts = [command] if isinstance(command, str) else command
        if not any("{path}" in c for c in parts):
            raise self.fail(
                (*keys, "command"),
                f"target {name!r}: a foreach target's command must contain {{path}}, "
                "where each matching file goes",
            )
        matches = sorted(glob.glob(pattern, root_dir=self.root, recursive=True))
        if not matches:
            raise self.fail(
                (*keys, "foreach"), f"target {name!r}: foreach {pattern!r} matches no file"
            )
        for rel in matches:
            if isinstance(command, str):
                cmd: str | tuple[str, ...] = command.replace("{path}", shlex.quote(rel))
            else:
                cmd = tuple(c.replace("{path}", rel) for c in command)
            self.add(keys, Target(name=f"{name}:{rel}", command=cmd, **base), group=name)

    def add(self, keys: tuple[str, ...], target: Target, group: str | None = None) -> None:
        if target.name in self.targets:
            raise self.fail(keys, f"duplicate target name {target.name!r}")
        self.targets[target.name] = target
        if group:
            self.groups.setdefault(group, []).append(target.name)

    @property
    def groups(self) -> dict[str, list[str]]:
        if not hasattr(self, "_groups"):
            self._groups: dict[str, list[str]] = {}
        return self._groups

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
            resolved[name] = _replace(t, needs=tuple(dict.fromkeys(needs)))
        self.targets = resolved
        cycle = find_cycle({n: t.needs for n, t in self.targets.items()})
        if cycle:
            group = cycle[0].split(":", 1)[0]
            raise self.fail(
                ("targets", group, "needs"),
                f"needs form a cycle: {' -> '.join(cycle)} (remove one of these needs)",
            )


def find_cycle(edges: dict[str, tuple[str, ...]]) -> list[str] | None:
    """A cycle in ``edges`` as a list of names ending where it starts, or None."""
    color: dict[str, int] = {}
    stack: list[str] = []

    def visit(n: str) -> list[str] | None:
        color[n] = 1
        stack.append(n)
        for m in edges.get(n, ()):
            if color.get(m) == 1:
                return [*stack[stack.index(m) :], m]
            if color.get(m) is None:
                found = visit(m)
                if found:
                    return found
        stack.pop()
        color[n] = 2
        return None

    for n in edges:
        if n not in color:
            found = visit(n)
            if found:
                return found
    return None


def _cmd(command: str | list[str]) -> str | tuple[str, ...]:
    return command if isinstance(command, str) else tuple(command)


def _replace(t: Target, **changes: Any) -> Target:
    from dataclasses import replace

    return replace(t, **changes)


def _closest(key: str, known: set[str]) -> str | None:
    import difflib

    hits = difflib.get_close_matches(key, sorted(known), n=1, cutoff=0.6)
    return hits[0] if hits else None
