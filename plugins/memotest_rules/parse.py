"""Reads BUILD files without running them: ``ast.parse``, then a small evaluator that
accepts only literal data, ``glob()`` and ``+``.

``load(...)`` is ignored; the rules in :data:`RULES` are read. Anything else at the top
level (another rule or macro: ``py_binary``, ``genrule``, ``cc_*``; an assignment, a
``def``, an ``if``) is not read but *set aside* (:class:`Unread`, with why), as is a rule
of :data:`RULES` whose attributes memotest cannot read: a real BUILD file mixes tests with
what memotest does not build, and its tests still load (a test that needs what was set
aside is set aside itself, by the plugin). Attribute values may be strings, numbers,
booleans, ``None``, lists, tuples, dicts with string keys, ``glob([...], exclude=[...])``
and ``+`` of two lists (or two strings). A syntax error and a name defined twice are
errors naming the file and line.
"""

from __future__ import annotations

import ast
import glob as globmod
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memotest.errors import ConfigError
from memotest_rules.layout import BUILD_NAMES

TEST_ATTRS = {"name", "srcs", "deps", "data", "args", "env", "size", "timeout", "tags", "flaky"}
#: Attributes each rule reads.
RULES: dict[str, set[str]] = {
    "py_test": TEST_ATTRS | {"main", "imports"},
    "sh_test": TEST_ATTRS,
    "test_suite": {"name", "tests", "tags"},
    "py_library": {"name", "srcs", "deps", "data", "imports", "tags"},
    "filegroup": {"name", "srcs", "data", "tags"},
}
#: Attributes Bazel knows that change nothing here (access control, build settings).
IGNORED_ATTRS = {
    "visibility",
    "testonly",
    "licenses",
    "features",
    "compatible_with",
    "restricted_to",
    "target_compatible_with",
    "exec_compatible_with",
    "exec_properties",
    "deprecation",
    "shard_count",
    "local",
    "python_version",
    "srcs_version",
    "legacy_create_init",
    "stamp",
    "toolchains",
    "output_licenses",
}
#: Why a rule of a kind memotest does not know is set aside.
NOT_BUILT = "memotest does not build it"
SKIP_DIRS = {".memotest", "node_modules", "__pycache__", "site-packages"}


@dataclass
class Rule:
    """One rule call in a BUILD file, its attributes evaluated."""

    kind: str
    package: str  # "" for the root package, else "a/b"
    name: str
    attrs: dict[str, Any]
    file: str
    line: int
    lines: dict[str, int] = field(default_factory=dict)  # attribute -> line

    @property
    def label(self) -> str:
        return f"//{self.package}:{self.name}"

    def where(self, attr: str | None = None) -> str:
        return f"{self.file}:{self.lines.get(attr, self.line) if attr else self.line}"


@dataclass
class Unread:
    """A top-level statement of a BUILD file that memotest does not read: ``kind`` is the
    rule's function (or what the statement is), ``name`` its literal ``name`` if any."""

    kind: str
    package: str
    name: str | None
    file: str
    line: int
    why: str

    @property
    def label(self) -> str | None:
        return f"//{self.package}:{self.name}" if self.name else None


def find_build_files(root: Path) -> list[tuple[str, Path]]:
    """Every package under ``root`` as (package, BUILD file), sorted; hidden folders,
    ``.memotest``, virtual environments and ``bazel-*`` output links are skipped."""
    found: list[tuple[str, Path]] = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(
            d
            for d in dirs
            if not d.startswith((".", "bazel-"))
            and d not in SKIP_DIRS
            and not os.path.exists(os.path.join(folder, d, "pyvenv.cfg"))
        )
        for name in BUILD_NAMES:
            if name in files and os.path.isfile(os.path.join(folder, name)):
                rel = os.path.relpath(folder, root)
                found.append(("" if rel == "." else rel.replace(os.sep, "/"), Path(folder, name)))
                break
    return sorted(found)


class BuildFile:
    """Parses one BUILD file into :class:`Rule` objects."""

    def __init__(self, root: Path, package: str, path: Path, packages: set[str]) -> None:
        self.root = root
        self.package = package
        self.path = path
        self.packages = packages  # every package, so that glob() stays in its own
        self.folder = root / package if package else root
        #: What :meth:`rules` set aside, in file order.
        self.unread: list[Unread] = []

    def fail(self, node: ast.AST | int, message: str) -> ConfigError:
        line = node if isinstance(node, int) else getattr(node, "lineno", None)
        return ConfigError(f"{self.path}:{line}: {message}" if line else f"{self.path}: {message}")

    def rules(self) -> list[Rule]:
        try:
            text = self.path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"{self.path}: cannot read: {exc}") from None
        try:
            tree = ast.parse(text, filename=str(self.path))
        except SyntaxError as exc:
            raise ConfigError(
                f"{self.path}:{exc.lineno}: BUILD syntax error: {exc.msg}"
                if exc.lineno
                else f"{self.path}: BUILD syntax error: {exc.msg}"
            ) from None
        out: list[Rule] = []
        seen: dict[str, int] = {}
        for stmt in tree.body:
            if (
                isinstance(stmt, ast.Expr)
                and isinstance(stmt.value, ast.Constant)
                and isinstance(stmt.value.value, str)
            ):
                continue  # a docstring
            if not isinstance(stmt, ast.Expr) or not isinstance(stmt.value, ast.Call):
                self.set_aside(_describe(stmt), None, stmt.lineno, "not a rule call")
                continue
            call = stmt.value
            func = call.func.id if isinstance(call.func, ast.Name) else None
            if func == "load":
                continue
            name = _literal_name(call)
            if name is not None and name in seen:
                raise self.fail(
                    call,
                    f"duplicate target name {name!r} in package //{self.package} "
                    f"(first defined on line {seen[name]})",
                )
            if name is not None:
                seen[name] = call.lineno
            if func not in RULES:
                what = f"{func}()" if func else ast.unparse(call.func)
                self.set_aside(what, name, call.lineno, NOT_BUILT)
                continue
            try:
                out.append(self.rule(func, call))
            except ConfigError as exc:
                self.set_aside(f"{func}()", name, call.lineno, str(exc))
        return out

    def set_aside(self, kind: str, name: str | None, line: int, why: str) -> None:
        self.unread.append(Unread(kind, self.package, name, str(self.path), line, why))

    def rule(self, kind: str, call: ast.Call) -> Rule:
        if call.args:
            raise self.fail(call, f'{kind}() takes keyword arguments only, like name = "..."')
        attrs: dict[str, Any] = {}
        lines: dict[str, int] = {}
        for kw in call.keywords:
            if kw.arg is None:
                raise self.fail(kw.value, f"{kind}(**...) is not supported: name each attribute")
            if kw.arg not in RULES[kind] and kw.arg not in IGNORED_ATTRS:
                raise self.fail(
                    kw.value,
                    f"{kind}() attribute {kw.arg!r} is not supported "
                    f"(supported: {', '.join(sorted(RULES[kind]))})",
                )
            if kw.arg in IGNORED_ATTRS:
                continue
            attrs[kw.arg] = self.value(kw.value)
            lines[kw.arg] = kw.value.lineno
        name = attrs.get("name")
        if not isinstance(name, str) or not name:
            raise self.fail(call, f'{kind}() needs a name = "..."')
        if ":" in name or name.startswith("/"):
            raise self.fail(call, f"{kind}() name {name!r} may not contain ':' or start with '/'")
        attrs = {k: v for k, v in attrs.items() if v is not None}
        return Rule(kind, self.package, name, attrs, str(self.path), call.lineno, lines)

    # -- values ----------------------------------------------------------------------------

    def value(self, node: ast.AST) -> Any:
        if isinstance(node, ast.Constant):
            if node.value is None or isinstance(node.value, (str, int, bool)):
                return node.value
            raise self.fail(node, f"the value {node.value!r} is not supported")
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            inner = self.value(node.operand)
            if isinstance(inner, int) and not isinstance(inner, bool):
                return -inner
        if isinstance(node, (ast.List, ast.Tuple)):
            return [self.value(e) for e in node.elts]
        if isinstance(node, ast.Dict):
            out = {}
            for k, v in zip(node.keys, node.values, strict=True):
                if k is None:
                    raise self.fail(v, "{**...} is not supported in a BUILD file")
                key = self.value(k)
                if not isinstance(key, str):
                    raise self.fail(k, "dict keys must be strings")
                out[key] = self.value(v)
            return out
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            left, right = self.value(node.left), self.value(node.right)
            if isinstance(left, list) and isinstance(right, list):
                return left + right
            if isinstance(left, str) and isinstance(right, str):
                return left + right
            raise self.fail(node, "+ is supported only between two lists or two strings")
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            if node.func.id == "glob":
                return self.glob(node)
            raise self.fail(
                node,
                f"calling {node.func.id}() is not supported in a BUILD file "
                "(only glob() may be called inside a rule)",
            )
        raise self.fail(
            node,
            f"{_describe(node)} is not supported in a BUILD file "
            "(use literal strings, lists, dicts, numbers, booleans, glob() and +)",
        )

    def glob(self, node: ast.Call) -> list[str]:
        include: Any = None
        exclude: Any = []
        allow_empty = True
        if len(node.args) > 2:
            raise self.fail(node, "glob() takes an include list and an exclude list")
        if node.args:
            include = self.value(node.args[0])
        if len(node.args) == 2:
            exclude = self.value(node.args[1])
        for kw in node.keywords:
            if kw.arg == "include":
                include = self.value(kw.value)
            elif kw.arg == "exclude":
                exclude = self.value(kw.value)
            elif kw.arg == "allow_empty":
                allow_empty = bool(self.value(kw.value))
            elif kw.arg == "exclude_directories":
                self.value(kw.value)  # directories are never matched here
            else:
                raise self.fail(kw.value, f"glob() has no argument {kw.arg!r}")
        for what, pats in (("include", include), ("exclude", exclude)):
            if not isinstance(pats, list) or not all(isinstance(p, str) for p in pats):
                raise self.fail(node, f"glob() {what} must be a list of strings")
        for pat in include + exclude:
            if pat.startswith("/") or ".." in pat.split("/"):
                raise self.fail(node, f"glob pattern {pat!r} must stay inside the package")
        matched = self.expand(include) - self.expand(exclude)
        if not matched and not allow_empty:
            raise self.fail(node, f"glob({include!r}) matches no file (allow_empty = False)")
        return sorted(matched)

    def expand(self, patterns: list[str]) -> set[str]:
        """Files (not folders) under the package matching the patterns, relative to it,
        leaving out those of sub-packages (as Bazel)."""
        out: set[str] = set()
        for pat in patterns:
            for rel in globmod.glob(pat, root_dir=self.folder, recursive=True):
                full = self.folder / rel
                if full.is_file() and not self.in_subpackage(rel):
                    out.add(rel.replace(os.sep, "/"))
        return out

    def in_subpackage(self, rel: str) -> bool:
        parts = rel.replace(os.sep, "/").split("/")[:-1]
        for i in range(1, len(parts) + 1):
            sub = "/".join(parts[:i])
            if (f"{self.package}/{sub}" if self.package else sub) in self.packages:
                return True
        return False


def _literal_name(call: ast.Call) -> str | None:
    """The ``name = "..."`` of a rule call, when it is a literal string."""
    for kw in call.keywords:
        if kw.arg == "name" and isinstance(kw.value, ast.Constant):
            return kw.value.value if isinstance(kw.value.value, str) else None
    return None


def _describe(node: ast.AST) -> str:
    names = {
        ast.Assign: "an assignment",
        ast.AugAssign: "an assignment",
        ast.AnnAssign: "an assignment",
        ast.FunctionDef: "a function definition (def)",
        ast.AsyncFunctionDef: "a function definition (def)",
        ast.ClassDef: "a class definition",
        ast.If: "an if statement",
        ast.For: "a for loop",
        ast.While: "a while loop",
        ast.Import: "an import",
        ast.ImportFrom: "an import",
        ast.Name: "a variable",
        ast.Attribute: "an attribute access",
        ast.ListComp: "a list comprehension",
        ast.DictComp: "a dict comprehension",
        ast.Subscript: "indexing",
        ast.IfExp: "a conditional expression",
        ast.JoinedStr: "an f-string",
        ast.Lambda: "a lambda",
        ast.Expr: "an expression statement",
    }
    kind = names.get(type(node), f"a {type(node).__name__}")
    try:
        text = ast.unparse(node).splitlines()[0]
    except Exception:  # pragma: no cover - unparse handles every parsed node
        return kind
    if len(text) > 40:
        text = text[:37] + "..."
    return f"{kind} ({text})"
