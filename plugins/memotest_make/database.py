"""Reads a Makefile's targets from make's own database (``make -pRrq``), as shell
completion does: make parses the file (includes, conditionals, functions), so the targets
are exactly the ones make knows, and a syntax error comes back with make's file:line.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from memotest.errors import ConfigError

#: Read after the Makefile (``-f -``): copies what the loader needs into simple variables.
PROBE = (
    "__memotest_targets_origin := $(origin MEMOTEST_TARGETS)\n"
    "__memotest_targets := $(MEMOTEST_TARGETS)\n"
)
#: make's own variables that must not leak from a calling make into the probe.
MAKE_VARS = ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES", "GNUMAKEFLAGS")
TIMEOUT = 60.0

_ERROR = re.compile(r"^(?P<file>[^:\n]+?):(?P<line>\d+): (?P<msg>.*)$")
_RECIPE_AT = re.compile(r"^#\s+recipe to execute \(from '(?P<file>.*)', line (?P<line>\d+)\):")
_VAR = re.compile(r"^(?P<name>[^\s#:=]+) :?= ?(?P<value>.*)$")


@dataclass
class MakeTarget:
    """An explicit target of the Makefile: its prerequisites, and where its recipe is."""

    name: str
    prerequisites: list[str] = field(default_factory=list)
    phony: bool = False
    file: str | None = None
    line: int | None = None


@dataclass
class Database:
    targets: dict[str, MakeTarget]
    default_goal: str | None
    memotest_targets: list[str] | None  # MEMOTEST_TARGETS, None when not defined


def read(path: Path, make: str = "make") -> Database:
    """The explicit targets of the Makefile at ``path``; a ConfigError naming the file and
    line when make cannot read it. make runs in the Makefile's folder."""
    path = path.absolute()
    try:
        with open(path, "rb"):
            pass
    except OSError as exc:
        raise ConfigError(f"{path}: make: cannot read the Makefile: {exc.strerror}") from None
    program = shutil.which(make)
    if program is None:
        raise ConfigError(f"{path}: make: the {make!r} program is not on PATH")
    env = {k: v for k, v in os.environ.items() if k not in MAKE_VARS}
    env["LC_ALL"] = "C"
    try:
        proc = subprocess.run(
            [program, "-pRrq", "-f", str(path), "-f", "-", ":"],
            cwd=path.parent,
            env=env,
            input=PROBE,
            capture_output=True,
            text=True,
            errors="replace",
            timeout=TIMEOUT,
        )
    except subprocess.TimeoutExpired:
        raise ConfigError(f"{path}: make: reading the Makefile took over {TIMEOUT:.0f}s") from None
    check_errors(path, proc.stderr)
    if "\n# Files\n" not in proc.stdout:
        raise ConfigError(f"{path}: make: make printed no database (is {program} GNU make?)")
    return parse(proc.stdout, path.parent)


def check_errors(path: Path, stderr: str) -> None:
    """Raises the first error make reported (warnings and the probe's own ``No rule to
    make target ':'`` are not errors)."""
    for line in stderr.splitlines():
        if not line.strip() or ": warning:" in line or "No rule to make target ':'" in line:
            continue
        m = _ERROR.match(line)
        if m:
            file = m.group("file")
            where = os.path.join(path.parent, file) if file != "-" else str(path)
            msg = m.group("msg").removeprefix("*** ").removesuffix("  Stop.")
            raise ConfigError(f"{where}:{m.group('line')}: make: {msg}")
        msg = line.removeprefix("make: ").removeprefix("*** ").removesuffix("  Stop.")
        raise ConfigError(f"{path}: make: {msg}")


def parse(text: str, folder: Path) -> Database:
    """Parses ``make -p`` output: variables from the top, targets from ``# Files``."""
    head, _, files = text.partition("\n# Files\n")
    files = files.split("\n# files hash-table stats", 1)[0]
    variables: dict[str, str] = {}
    for line in head.splitlines():
        m = _VAR.match(line)
        if m:
            variables.setdefault(m.group("name"), m.group("value"))
    makefiles = set(variables.get("MAKEFILE_LIST", "").split())
    targets: dict[str, MakeTarget] = {}
    for para in files.split("\n\n"):
        lines = para.strip("\n").splitlines()
        if any(
            ln.startswith(("# Not a target:", "# File is an intermediate prerequisite"))
            for ln in lines
        ):
            continue
        rule = next((ln for ln in lines if ln and not ln.startswith(("#", "\t"))), None)
        if rule is None:
            continue
        m = re.match(r"^((?:\\.|[^:\\])+):{1,2}(?:\s+(.*))?$", rule)
        if not m:
            continue
        name = m.group(1).replace("\\:", ":")
        if name.startswith(".") or "%" in name or name in makefiles or " " in name:
            continue
        t = MakeTarget(name)
        t.prerequisites = [p for p in (m.group(2) or "").split() if p != "|"]
        for ln in lines:
            if ln.startswith("#  Phony target"):
                t.phony = True
            r = _RECIPE_AT.match(ln)
            if r:
                t.file = str(folder / r.group("file"))
                t.line = int(r.group("line"))
        targets.setdefault(name, t)
    origin = variables.get("__memotest_targets_origin", "undefined")
    memotest_targets = (
        None if origin == "undefined" else variables.get("__memotest_targets", "").split()
    )
    return Database(targets, variables.get(".DEFAULT_GOAL") or None, memotest_targets)
