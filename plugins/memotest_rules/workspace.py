"""The tests of a workspace's BUILD files as memotest targets (what
:mod:`memotest_rules.plugin` loads; the rules' reading is :mod:`memotest_rules.parse`)."""

from __future__ import annotations

import glob
import os
from dataclasses import dataclass
from pathlib import Path

from memotest.errors import ConfigError
from memotest.model import SourceLocation, Target
from memotest_rules.parse import NOT_BUILT, BuildFile, Rule, Unread, find_build_files

SIZE_TIMEOUTS = {"small": 60, "medium": 300, "large": 900, "enormous": 3600}
TIMEOUTS = {"short": 60, "moderate": 300, "long": 900, "eternal": 3600}
TEST_RULES = ("py_test", "sh_test")
PYTHON = "python3"
#: What runs a py_test's main file: as ``python3 MAIN`` does, with memotest's listing watch
#: (``launch_path/memotest_py_test.py``: a new file at the root does not re-run it).
LAUNCHER = str(Path(__file__).resolve().parent / "launch_path" / "memotest_py_test.py")


@dataclass
class Test:
    rule: Rule
    target: Target
    tags: frozenset[str]  # as written in the BUILD file
    size: str

    @property
    def manual(self) -> bool:
        return "manual" in self.tags


class Workspace:
    """Every rule of the workspace, and the tests as memotest targets."""

    def __init__(self, root: Path) -> None:
        self.root = root
        files = find_build_files(root)
        packages = {pkg for pkg, _ in files}
        self.rules: dict[str, Rule] = {}
        #: What the BUILD files hold that memotest does not run, and the tests and suites
        #: that need it (:meth:`unread_note` says it once).
        self.unread: list[Unread] = []
        self.unread_labels: dict[str, Unread] = {}
        for pkg, path in files:
            build = BuildFile(root, pkg, path, packages)
            for rule in build.rules():
                self.rules[rule.label] = rule
            self.unread += build.unread
        self.unread_labels = {u.label: u for u in self.unread if u.label}
        self._files: dict[str, tuple[list[str], list[str]]] = {}
        self._visiting: set[str] = set()
        self.tests: dict[str, Test] = {}
        for label, rule in self.rules.items():
            if rule.kind in TEST_RULES:
                try:
                    self.tests[label] = self.test(rule)
                except ConfigError as exc:
                    self.set_aside(rule, str(exc))
        self.suites: dict[str, list[str]] = {}
        for label, rule in self.rules.items():
            if rule.kind == "test_suite":
                try:
                    self.suites[label] = self.expand_suite(rule, set())
                except ConfigError as exc:
                    self.set_aside(rule, str(exc))

    def set_aside(self, rule: Rule, why: str) -> None:
        unread = Unread(f"{rule.kind}()", rule.package, rule.name, rule.file, rule.line, why)
        self.unread.append(unread)
        self.unread_labels[rule.label] = unread

    def unread_note(self) -> str | None:
        """One note for everything set aside: the kinds of rule memotest does not build,
        counted, and each test or rule it could not read, with why."""
        if not self.unread:
            return None
        foreign: dict[str, int] = {}
        lines = []
        for u in self.unread:
            if u.why == NOT_BUILT:
                foreign[u.kind] = foreign.get(u.kind, 0) + 1
            else:
                what = u.label or f"{u.kind} at {u.file}:{u.line}"
                lines.append(f"  {what}: {u.why}")
        head = []
        if foreign:
            counted = ", ".join(f"{n} {k}" for k, n in sorted(foreign.items()))
            head.append(f"{counted} (memotest runs py_test, sh_test and test_suite)")
        if lines:
            head.append(f"{len(lines)} more it could not read")
        text = "memotest: BUILD files: not run: " + "; ".join(head)
        return "\n".join([text, *lines])

    # -- attributes ----------------------------------------------------------------------

    def fail(self, rule: Rule, attr: str | None, message: str) -> ConfigError:
        return ConfigError(f"{rule.where(attr)}: {rule.kind} {rule.name!r}: {message}")

    def strings(self, rule: Rule, attr: str) -> list[str]:
        value = rule.attrs.get(attr, [])
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise self.fail(rule, attr, f"{attr} must be a list of strings")
        return value

    def label(self, rule: Rule, text: str, attr: str) -> tuple[str, str] | None:
        """(package, name) of a label written in ``rule``; None for an external one."""
        if text.startswith("@"):
            return None
        if text.startswith("//"):
            pkg, colon, name = text[2:].partition(":")
            if not colon:
                name = pkg.rsplit("/", 1)[-1]
        elif text.startswith(":"):
            pkg, name = rule.package, text[1:]
        else:
            pkg, name = rule.package, text
        if not name or pkg.endswith("/") or ".." in name.split("/"):
            raise self.fail(rule, attr, f"{text!r} is not a valid label")
        return pkg, name

    def files(self, rule: Rule) -> tuple[list[str], list[str]]:
        """The files ``rule`` stands for (srcs, data and those of its deps, transitively,
        relative to the workspace root) and its ``imports`` folders (absolute)."""
        if rule.label in self._files:
            return self._files[rule.label]
        if rule.label in self._visiting:
            raise self.fail(rule, "deps", "deps form a cycle")
        self._visiting.add(rule.label)
        files: list[str] = []
        imports: list[str] = []
        base = self.root / rule.package
        for imp in self.strings(rule, "imports"):
            imports.append(os.path.normpath(base / imp))
        for attr in ("srcs", "data", "deps"):
            for text in self.strings(rule, attr):
                more, more_imports = self.resolve(rule, text, attr)
                files += more
                imports += more_imports
        self._visiting.discard(rule.label)
        result = list(dict.fromkeys(files)), list(dict.fromkeys(imports))
        self._files[rule.label] = result
        return result

    def resolve(self, rule: Rule, text: str, attr: str) -> tuple[list[str], list[str]]:
        where = self.label(rule, text, attr)
        if where is None:
            return [], []  # an external repository: the tracer sees what is read from it
        pkg, name = where
        label = f"//{pkg}:{name}"
        unread = self.unread_labels.get(label)
        if unread is not None:
            raise self.fail(
                rule, attr, f"needs {label}, a {unread.kind} memotest does not read ({unread.why})"
            )
        other = self.rules.get(label)
        if other is not None:
            if other.kind == "test_suite":
                raise self.fail(rule, attr, f"{text!r} is a test_suite, not files")
            return self.files(other)
        rel = f"{pkg}/{name}" if pkg else name
        if attr != "deps" and (self.root / rel).exists():
            return [rel], []
        raise self.fail(
            rule,
            attr,
            f"{attr} entry {text!r}: no target {label}"
            + ("" if attr == "deps" else f" and no file {rel}"),
        )

    # -- tests ---------------------------------------------------------------------------

    def test(self, rule: Rule) -> Test:
        a = rule.attrs
        srcs: list[str] = []
        for text in self.strings(rule, "srcs"):
            srcs += self.resolve(rule, text, "srcs")[0]
        srcs = list(dict.fromkeys(srcs))
        files, imports = self.files(rule)
        args = self.strings(rule, "args")
        for arg in args:
            if "$(" in arg:
                raise self.fail(rule, "args", f"make variables like {arg!r} are not supported")
        env = a.get("env", {})
        if not isinstance(env, dict) or not all(isinstance(v, str) for v in env.values()):
            raise self.fail(rule, "env", 'env must map names to strings, like {"A": "1"}')
        tags = frozenset(self.strings(rule, "tags"))
        size = a.get("size", "medium")
        if size not in SIZE_TIMEOUTS:
            raise self.fail(rule, "size", f"size must be one of {', '.join(SIZE_TIMEOUTS)}")
        timeout = a.get("timeout")
        if timeout is not None and timeout not in TIMEOUTS:
            raise self.fail(rule, "timeout", f"timeout must be one of {', '.join(TIMEOUTS)}")
        flaky = a.get("flaky", False)
        if not isinstance(flaky, bool):
            raise self.fail(rule, "flaky", "flaky must be True or False")
        run_env: dict[str, str] = {}
        if rule.kind == "py_test":
            main = self.main(rule, srcs)
            command: tuple[str, ...] = (PYTHON, LAUNCHER, main, *args)
            run_env["PYTHONPATH"] = os.pathsep.join([str(self.root), *imports])
        else:
            if len(srcs) != 1:
                raise self.fail(rule, "srcs", f"sh_test needs exactly one src, found {len(srcs)}")
            command = ("sh", srcs[0], *args)
        run_env.update(env)
        core_tags = {t for t in ("exclusive", "no-cache", "flaky") if t in tags}
        if "external" in tags:
            core_tags.add("no-cache")
        if flaky:
            core_tags.add("flaky")
        target = Target(
            name=rule.label,
            command=command,
            cwd=str(self.root),
            env=tuple(sorted(run_env.items())),
            timeout=float(TIMEOUTS[timeout] if timeout else SIZE_TIMEOUTS[size]),
            tags=frozenset(core_tags),
            # literal file names: a declared input with [*? is a pattern (inputs/matches.py)
            inputs=tuple(sorted({glob.escape(f) for f in files})),
            source=SourceLocation(rule.file, rule.line),
        )
        return Test(rule, target, tags, size)

    def main(self, rule: Rule, srcs: list[str]) -> str:
        main = rule.attrs.get("main")
        if main is not None:
            if not isinstance(main, str):
                raise self.fail(rule, "main", "main must be a string")
            found, _ = self.resolve(rule, main, "main")
            if len(found) != 1:
                raise self.fail(rule, "main", f"main {main!r} must name one file")
            return found[0]
        wanted = [s for s in srcs if s.rsplit("/", 1)[-1] == rule.name + ".py"]
        if len(wanted) == 1:
            return wanted[0]
        if len(srcs) == 1:
            return srcs[0]
        raise self.fail(
            rule,
            "srcs",
            f"which src is the test? none is named {rule.name}.py and there are "
            f'{len(srcs)}: set main = "..."',
        )

    # -- suites and labels ---------------------------------------------------------------

    def expand_suite(self, suite: Rule, seen: set[str]) -> list[str]:
        """The tests of a test_suite, as ``bazel test`` would run them."""
        if suite.label in seen:
            raise self.fail(suite, "tests", "test_suites include each other in a cycle")
        seen = seen | {suite.label}
        listed = self.strings(suite, "tests")
        if not listed:
            found = [
                label
                for label, t in self.tests.items()
                if t.rule.package == suite.package and not t.manual
            ]
        else:
            found = []
            for text in listed:
                where = self.label(suite, text, "tests")
                if where is None:
                    raise self.fail(suite, "tests", f"external test {text!r} is not supported")
                label = f"//{where[0]}:{where[1]}"
                if label in self.tests:
                    found.append(label)
                elif label in self.rules and self.rules[label].kind == "test_suite":
                    found += self.expand_suite(self.rules[label], seen)
                else:
                    raise self.fail(suite, "tests", f"{text!r} is not a test or test_suite")
        wanted = self.strings(suite, "tags")
        plus = {t for t in wanted if not t.startswith("-")}
        minus = {t[1:] for t in wanted if t.startswith("-")}
        out = []
        for label in found:
            have = self.tests[label].tags | {self.tests[label].size}
            if (not plus or plus & have) and not minus & have:
                out.append(label)
        return list(dict.fromkeys(out))

    def expand(self, name: str) -> list[str] | None:
        """The test labels ``name`` stands for, or None to leave it to the core."""
        pattern = name if name.startswith("//") or not name.endswith("...") else "//" + name
        plain = [lb for lb, t in self.tests.items() if not t.manual]
        if pattern in ("//...", "//:..."):
            return plain
        if pattern.endswith("/..."):
            pkg = pattern[2:-4]
            return [
                lb
                for lb in plain
                if self.tests[lb].rule.package == pkg
                or self.tests[lb].rule.package.startswith(pkg + "/")
            ]
        pkg, colon, target = pattern[2:].partition(":")
        if (
            pattern.startswith("//")
            and colon
            and target in ("all", "*", "all-targets")
            and f"//{pkg}:{target}" not in self.tests
        ):
            return [lb for lb in plain if self.tests[lb].rule.package == pkg]
        if name in self.suites:
            return self.suites[name]
        if name in self.tests:
            return [name]
        if name.startswith("//") and not colon:
            short = f"//{pkg}:{pkg.rsplit('/', 1)[-1]}"  # //pkg means //pkg:pkg in Bazel
            if short in self.tests or short in self.suites:
                return self.expand(short)
        return None
