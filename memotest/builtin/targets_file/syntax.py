"""Reads a targets file's text into plain data, with the line of every table and key.

tomllib and PyYAML give values without positions, so the line numbers are found on the
side (:func:`toml_lines`, :func:`yaml_lines`): every later error names ``file:line``.
YAML keys must be unique (PyYAML would keep the last silently). Syntax errors become
:class:`ConfigError` with the line the parser reports.
"""

from __future__ import annotations

import functools
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memotest.errors import ConfigError

if TYPE_CHECKING:
    import yaml

# tomllib and yaml are imported when a file of their kind is parsed: every command loads
# this plugin, and most projects have one kind of targets file (yaml: 20 ms of a start).

#: Where each table and key is: ("targets", "a", "command") -> line number.
Lines = dict[tuple[str, ...], int]


def parse(path: Path, text: str) -> tuple[dict[str, Any], Lines]:
    """The data of a ``.toml``, ``.yaml`` or ``.yml`` file and its lines."""
    if path.suffix in (".yaml", ".yml"):
        return parse_yaml(path, text)
    return parse_toml(path, text)


def parse_toml(path: Path, text: str) -> tuple[dict[str, Any], Lines]:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        msg = str(exc)
        m = re.search(r"\(at line (\d+), column \d+\)", msg)
        line = m.group(1) if m else None
        msg = re.sub(r"\s*\(at line \d+, column \d+\)", "", msg)
        where = f"{path}:{line}" if line else str(path)
        raise ConfigError(f"{where}: TOML syntax error: {msg}") from None
    return data, toml_lines(text)


def toml_lines(text: str) -> Lines:
    """Best-effort line numbers of tables and keys (tomllib does not report them)."""
    lines: Lines = {}
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


@functools.cache
def _unique_key_loader() -> type[yaml.SafeLoader]:
    import yaml

    class _UniqueKeyLoader(yaml.SafeLoader):
        pass

    return _UniqueKeyLoader


def parse_yaml(path: Path, text: str) -> tuple[dict[str, Any], Lines]:
    import yaml

    lines: Lines = {}
    loader = _unique_key_loader()
    try:
        node = yaml.compose(text, Loader=loader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark else str(path)
        problem = getattr(exc, "problem", None) or str(exc)
        raise ConfigError(f"{where}: YAML syntax error: {problem}") from None
    if node is None:
        return {}, lines
    yaml_lines(path, node, (), lines)
    data = loader(text).construct_document(node)
    if not isinstance(data, dict):
        raise ConfigError(f"{path}:1: the top level must be a mapping with a 'targets' key")
    return data, lines


def yaml_lines(path: Path, node: yaml.Node, prefix: tuple[str, ...], out: dict) -> None:
    import yaml

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
            yaml_lines(path, v, (*prefix, name), out)
