"""Soundness audit: does every kind of change to what a target observed re-run it?

On one real project's suite (a PyPI release laid into ``.bench/soundness/PROJECT``, one
target per test file through ``memotest build --pytest``), everything is built first so
that every target is cached. Then, for every target and for each kind of change, the change
is made, ``memotest build`` runs, whether the target re-ran is recorded (with memotest's
reason), the change is undone and the target rebuilt so the next case starts from a cached
state:

1. ``edit``: append a comment to a source file among its recorded inputs (``file``);
2. ``delete``: delete a source file it read;
3. ``create-absent``: create a file it looked for and did not find (an ``absent`` input
   inside the project; preferably in a folder it did not list, so that only the absent
   check can see it);
4. ``add-to-listed``: add a file to a folder it listed (a ``list`` input inside the project;
   on the ``copy@`` targets too, fresh runs, whose listings are all whole);
5. ``grandchild``: change a file read only by a grandchild process (small extra targets:
   ``sh -> sh -> python`` reading a file, ``sh -> sh -> cat``, and ``sh -> env -i python``,
   a child that clears its environment);
6. ``shared-object``: change a shared object it loaded (an extra target loads, with
   ctypes, a copy of a shared library the suite's targets load; the copy is then changed by
   appending bytes, which leaves it loadable);
7. ``pass-env``: set a ``pass_env`` variable (``PYTHONSOUNDNESSPROBE``, matched by the
   default ``PYTHON*``) in the environment of ``memotest build``; every target;
8. ``definition``: edit its definition (``env`` gains a variable). ``--pytest`` targets
   have no definition file, so this kind runs on ``copy@`` targets, a memotest.toml copy of
   the suite's targets (same commands, same folder), and on the extra targets;
9. ``worker``: change a file only the warm worker read (a module of pluggy, in the venv:
   the ``--pytest`` targets are forked from a process that imported pytest and its
   plugins, and the run itself does not read it again); the file's content and times are
   put back afterwards;
10. ``preloaded``: change a module of a library the warm worker preloaded
    (``memotest/tracer/warm/preload.py``: one of the site-packages modules listed in the
    project's ``.memotest/warm.json`` after the first build, read by the worker, not by
    the run); content and times are put back afterwards;
11. ``unrelated``: create a new file in a folder no target listed, and append to a file no
    target read: every target must stay cached.

And for the Python files a ``--pytest`` target's record holds by the code of them that ran
(``code`` inputs, ``memotest/inputs/code.py``), an edit that changes bytecode but moves
no line (``_soundness_probe = 1;`` put before the first statement of a function):

12. ``code-ran``: to a function the run executed: it must re-run;
13. ``code-module``: a statement appended to the module: it must re-run;
14. ``code-not-ran``: to a function the run did not execute: it must stay cached.

And for the folders a record holds by the entries its readers looked for (``entries``
inputs, ``memotest/inputs/entries.py``), and the ``pyproject.toml`` it holds by its
``tool.pytest`` table (``section`` inputs, ``memotest/inputs/section.py``):

15. ``entries-looked-for``: create an entry that was looked for and was not there (a
    folder of that name, which no import would take for a module: an empty folder is at
    most a namespace package, which any regular module found later wins over; or a name
    made from a pattern that was looked for): it must re-run;
16. ``entries-other``: create a file no reader looked for in that folder: it must stay
    cached;
17. ``section-pytest``: a key added to the ``tool.pytest.ini_options`` table: it must
    re-run;
18. ``section-other``: a table of another tool appended: it must stay cached.

And the classes of issue 16, as small extra targets in ``redteam/`` of the scratch project
(``benchmarks/soundness_redteam.py``, whose docstring says what each does): ``service``,
``service-declared``, ``network-no-connect``, ``network-sink``, ``settings-shape``,
``settings-shape-other``, ``metadata``, ``metadata-mtime``, ``metadata-other``,
``umask``, ``rlimit``, ``append-read``, ``glibc-files``, ``proc-dev``, ``new-writer``,
``new-writer-same``, ``code-lineno``, ``code-lineno-other``, ``declared-glob``,
``declared-glob-other`` (the ``-other`` and ``-same`` ones and ``service-declared`` must
stay cached).

And the kinds of issue 18 (``benchmarks/soundness_order.py``): ``order`` (the default,
whole files: every test's outcome must agree with the file run whole by pytest when a
test depends on state an earlier one left) and ``order-select`` (the same under the
opt-in ``--select tests``: its disagreement is known and shown, not counted as a failure).

Kind 2 also runs on the ``copy@`` targets: deleting a module the suite imports makes
pytest's collection fail, and ``memotest build --pytest`` then refuses to run anything
(exit 2) before any target could re-run, which tests the loader, not the records.

A target whose baseline result is not reusable (memotest re-runs it every time) cannot be
audited: it is listed with memotest's reason and left out of the counts.

Run: ``python benchmarks/soundness.py [--project structlog] [--sample N]
[--kinds a,b] [--skip-suite]``: ``--kinds`` audits the named kinds only, ``--skip-suite``
runs the issue-16 kinds without the suite (with this interpreter's memotest, in about a
minute; results then go to ``benchmarks/results/soundness-kinds.json``). Uses the venv
and downloads of ``benchmarks/replay.py`` (``.bench/``). Prints ``kind: re-ran N/M`` per
kind and writes ``benchmarks/results/soundness.json``. Exit status 0 when every change
re-ran its target and every unrelated change left every target cached.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import random
import shutil
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import replay
import soundness_order as order
import soundness_redteam as redteam

REPO = replay.REPO
RESULTS = REPO / "benchmarks" / "results"
PROBE_VAR = "PYTHONSOUNDNESSPROBE"
KINDS = (
    "edit",
    "delete",
    "create-absent",
    "add-to-listed",
    "grandchild",
    "shared-object",
    "pass-env",
    "definition",
    "worker",
    "preloaded",
    "unrelated",
    "code-ran",
    "code-module",
    "code-not-ran",
    "entries-looked-for",
    "entries-other",
    "section-pytest",
    "section-other",
)
SUITE_KINDS = KINDS
KINDS = (*SUITE_KINDS, *redteam.KINDS, *order.KINDS)
EXPECT_CACHED = {"unrelated", "code-not-ran", "entries-other", "section-other"}
EXPECT_CACHED |= redteam.EXPECT_CACHED
PROBE = "_soundness_probe = 1; "

# Dumps every record's inputs (kind, path), status and reusability, for both stores.
INPUTS = r"""
import json, sys
from memotest.store import Store
out = {}
for root in sys.argv[2:]:
    st = Store.open(root, lock=False)
    try:
        for name, rec in st.records().items():
            out[name] = {"status": rec.status, "cacheable": rec.cacheable,
                         "why": rec.uncacheable_reason,
                         "inputs": [(fp.kind.value, fp.path) for fp in rec.inputs],
                         "code": {fp.path: sorted(json.loads(st.read_blob(fp.digest))["code"])
                                  for fp in rec.inputs if fp.kind.value == "code"},
                         "entries": {fp.path: json.loads(st.read_blob(fp.digest))
                                     for fp in rec.inputs if fp.kind.value == "entries"}}
    finally:
        st.close()
json.dump(out, open(sys.argv[1], "w"))
"""

# Absent paths whose creation would change what pytest collects or how it configures
# itself, or shadow a module: creating them tests pytest, not memotest.
HARMFUL_ABSENT = (
    "pyvenv.cfg",
    "history",
    ".so",
    "pytest.ini",
    ".pytest.ini",
    "pytest.toml",
    ".pytest.toml",
    "tox.ini",
    "setup.cfg",
    "pyproject.toml",
    "conftest.py",
    ".pth",
    "__path_hook__",
)


def log(msg: str) -> None:
    print(msg, flush=True)


class Audit:
    def __init__(
        self, project: replay.Project, version: str, jobs: int, want=lambda kind: True
    ) -> None:
        self.project = project
        self.want = want
        self.version = version
        self.jobs = jobs
        self.venv = replay.venv(project)
        self.py = str(self.venv / "bin" / "python")
        self.memotest = str(self.venv / "bin" / "memotest")
        self.work = replay.BENCH / "soundness" / project.name
        self.root = self.work / "project"
        self.extra = self.root / "extra"
        self.env = replay.environment(project, self.root, self.venv)
        self.builds = 0

    # -- setting up ------------------------------------------------------------------------

    def setup(self) -> None:
        shutil.rmtree(self.work, ignore_errors=True)
        self.root.mkdir(parents=True)
        src_root = replay.extracted(self.project.name, self.version)
        meta = replay.installed_metadata(src_root) if self.project.metadata else None
        dist = self.project.name.replace("-", "_").lower()
        replay.Lane(self.root).checkout(replay.release_files(src_root), meta, dist)
        self.pytest_targets = self.collect()
        self.write_extra()

    def collect(self) -> list[str]:
        out = self.work / "collect.json"
        subprocess.run(
            [self.py, "-c", replay.COLLECT, str(out), self.project.tests],
            cwd=self.root,
            env=self.env,
            capture_output=True,
            timeout=600,
        )
        data = json.loads(out.read_text())
        return sorted(f"pytest:{os.path.relpath(f, self.root)}" for f in data["files"])

    def write_extra(self) -> None:
        """extra/memotest.toml: a copy of the suite's targets, and the process-tree and
        shared-object targets, with their data."""
        (self.extra / "data").mkdir(parents=True)
        (self.extra / "lib").mkdir()
        for name in ("grand-python.txt", "grand-cat.txt", "grand-envi.txt"):
            (self.extra / "data" / name).write_text("one\n")
        lib = self.shared_library()
        shutil.copy(lib, self.extra / "lib" / "libcopy.so")
        self.copied_library = lib
        py = self.py
        lines = ["[settings]", "jobs = 2", ""]
        for t in self.pytest_targets:
            rel = t.removeprefix("pytest:")
            argv = [py, "-m", "pytest", "-q", "-p", "no:cacheprovider", rel]
            lines += [
                f'[targets."copy@{rel}"]',
                f"command = {json.dumps(argv)}",
                'cwd = ".."',
                "",
            ]
        read = "import sys; open(sys.argv[1]).read()"
        lines += [
            "[targets.grandchild-python]",
            # /bin/sh -> sh -> python: the reader is a grandchild of the target's process;
            # "; true" keeps each shell from exec'ing its last command.
            "command = "
            + json.dumps(
                ["sh", "-c", f"sh -c {q(f'{py} -c {q(read)} data/grand-python.txt; true')}; true"]
            ),
            "",
            "[targets.grandchild-cat]",
            "command = "
            + json.dumps(["sh", "-c", "sh -c 'cat data/grand-cat.txt > /dev/null; true'; true"]),
            "",
            "[targets.grandchild-env-i]",
            # env -i clears the environment (LD_PRELOAD too): the tracer must re-inject.
            "command = "
            + json.dumps(["sh", "-c", f"env -i {py} -c {q(read)} data/grand-envi.txt; true"]),
            "",
            "[targets.shared-object]",
            "command = " + json.dumps([py, "-c", "import ctypes; ctypes.CDLL('./lib/libcopy.so')"]),
            "",
        ]
        (self.extra / "memotest.toml").write_text("\n".join(lines))
        self.extra_targets = ["grandchild-python", "grandchild-cat", "grandchild-env-i"]
        self.copy_targets = [f"copy@{t.removeprefix('pytest:')}" for t in self.pytest_targets]

    def shared_library(self) -> Path:
        """A shared library the suite's Python loads that a bare ``import ctypes`` does
        not: its copy is then loaded only through the path given to ctypes."""
        trace = self.work / "trace.json"
        subprocess.run(
            [self.memotest, "trace", "-o", str(trace), "--", self.py, "-c", "import uuid, ssl"],
            env=self.env,
            capture_output=True,
        )
        loaded = json.loads(trace.read_text()).get("loaded", [])
        for want in ("libuuid.so", "libssl.so", "libcrypto.so", "libsqlite3.so"):
            for p in loaded:
                if os.path.basename(p).startswith(want):
                    return Path(p)
        sys.exit(f"no shared library to copy among {loaded}")

    # -- building --------------------------------------------------------------------------

    def build(
        self,
        targets: list[str],
        *,
        toml: bool,
        env_extra: dict | None = None,
        force: bool = False,
    ) -> dict:
        """Builds ``targets`` (all when empty); returns {target: (status, reason)}."""
        report = self.work / "report.json"
        report.unlink(missing_ok=True)
        cmd = [self.memotest, "build", f"-j{self.jobs}", "--json-report", str(report)]
        cmd += ["--force"] if force else []
        if toml:
            cmd += ["-f", str(self.extra / "memotest.toml"), *targets]
        else:
            cmd += [*targets, "--pytest", self.project.tests]
        env = dict(self.env, **(env_extra or {}))
        proc = subprocess.run(
            cmd, cwd=self.root, env=env, capture_output=True, text=True, timeout=900
        )
        self.builds += 1
        if not report.exists():
            if not targets:
                log(f"  memotest refused to build: {(proc.stdout + proc.stderr).strip()[-500:]}")
            return {t: ("refused", (proc.stdout + proc.stderr).strip()[-300:]) for t in targets}
        data = json.loads(report.read_text())
        return {t["name"]: (t["status"], t.get("reason") or "") for t in data["targets"]}

    def records(self) -> dict:
        out = self.work / "inputs.json"
        subprocess.run(
            [self.py, "-c", INPUTS, str(out), str(self.root), str(self.extra)],
            env=self.env,
            check=True,
            capture_output=True,
        )
        return json.loads(out.read_text())

    def inside(self, path: str) -> bool:
        return path.startswith(str(self.root) + "/") and "/.memotest" not in path

    # -- the cases -------------------------------------------------------------------------

    def case(self, kind: str, target: str, change, undo, *, toml: bool, detail: str) -> dict | None:
        """Makes ``change``, builds the target, undoes, and rebuilds it to settle; nothing
        (``None``) for a kind not asked for (``--kinds``)."""
        if not self.want(kind):
            return None
        change()
        status, reason = self.build([target], toml=toml).get(target, ("missing", ""))
        undo()
        settle, _ = self.build([target], toml=toml).get(target, ("missing", ""))
        reran = status not in ("cached", "refused", "missing")
        ok = (status == "cached") if kind in EXPECT_CACHED else reran
        return {
            "kind": kind,
            "target": target,
            "change": detail,
            "status": status,
            "reason": reason,
            "ok": ok,
            "settled": settle,
        }


def q(text: str) -> str:
    """Single-quotes ``text`` for sh."""
    return "'" + text.replace("'", "'\"'\"'") + "'"


def file_edit(path: Path, data: bytes):
    original = path.read_bytes()

    def change() -> None:
        path.write_bytes(original + data)

    def undo() -> None:
        path.write_bytes(original)

    return change, undo


def file_edit_in_place(path: Path, data: bytes):
    """As :func:`file_edit`, and the undo also puts the file's times back: for files of the
    venv, whose compiled ``__pycache__`` copies stay valid only with the same mtime."""
    original = path.read_bytes()
    st = path.stat()

    def change() -> None:
        path.write_bytes(original + data)

    def undo() -> None:
        path.write_bytes(original)
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))

    return change, undo


def file_delete(path: Path):
    original = path.read_bytes()

    def change() -> None:
        path.unlink()

    def undo() -> None:
        path.write_bytes(original)

    return change, undo


def dir_create(path: Path):
    def change() -> None:
        path.mkdir()

    def undo() -> None:
        path.rmdir()

    return change, undo


def text_change(path: Path, new: str):
    original = path.read_text()

    def change() -> None:
        path.write_text(new)

    def undo() -> None:
        path.write_text(original)

    return change, undo


def file_create(path: Path):
    made = []

    def change() -> None:
        for parent in reversed(path.parents):
            if not parent.exists():
                parent.mkdir()
                made.append(parent)
        path.write_text("")

    def undo() -> None:
        path.unlink()
        for parent in reversed(made):
            parent.rmdir()
        made.clear()

    return change, undo


COMPOUND = (
    ast.If,
    ast.For,
    ast.AsyncFor,
    ast.While,
    ast.With,
    ast.AsyncWith,
    ast.Try,
    ast.FunctionDef,
    ast.AsyncFunctionDef,
    ast.ClassDef,
    ast.Match,
    *([ast.TryStar] if hasattr(ast, "TryStar") else []),
)


def probe_points(path: Path) -> dict[str, tuple[int, int]]:
    """``{qualified name: (line, column)}`` of the first statement of each function of a
    file (after its docstring), where :data:`PROBE` can go: simple statements only, and
    qualified names that occur once."""
    tree = ast.parse(path.read_bytes())
    found: dict[str, tuple[int, int] | None] = {}

    def walk(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = prefix + child.name
                inner = name + (".<locals>." if not isinstance(child, ast.ClassDef) else ".")
                if not isinstance(child, ast.ClassDef):
                    body = child.body
                    if (
                        body
                        and isinstance(body[0], ast.Expr)
                        and isinstance(getattr(body[0], "value", None), ast.Constant)
                    ):
                        body = body[1:]
                    point = None
                    if body and not isinstance(body[0], COMPOUND):
                        point = (body[0].lineno, body[0].col_offset)
                    found[name] = None if name in found else point
                walk(child, inner)
            else:
                walk(child, prefix)

    walk(tree, "")
    return {k: v for k, v in found.items() if v is not None}


def probe_edit(path: Path, point: tuple[int, int]):
    """Puts :data:`PROBE` before the statement at ``point``: new bytecode, no line moved."""
    original = path.read_bytes()
    lines = original.decode().splitlines(keepends=True)
    line, col = point
    text = lines[line - 1].encode()
    edited = text[:col] + PROBE.encode() + text[col:]
    lines[line - 1] = edited.decode()
    new = "".join(lines).encode()

    def change() -> None:
        path.write_bytes(new)

    def undo() -> None:
        path.write_bytes(original)

    return change, undo


def preloaded_packages(root: Path) -> set[str]:
    """The top-level packages a warm worker in ``root`` preloads (``.memotest/warm.json``)."""
    try:
        data = json.loads((root / ".memotest" / "warm.json").read_text())
    except (OSError, ValueError):
        return set()
    tops = set()
    for entry in data.get("interpreters", {}).values():
        tops.update(m.split(".", 1)[0] for m in entry.get("modules", []))
        tops.difference_update(entry.get("never", []))
    return tops


def pick(candidates: list[str], i: int) -> str | None:
    return sorted(candidates)[i % len(candidates)] if candidates else None


def wanted(kinds: str | None):
    """``--kinds a,b``: the test of a kind's name (every kind without it)."""
    if not kinds:
        return lambda kind: True
    chosen = {k.strip() for k in kinds.split(",") if k.strip()}
    unknown = chosen - set(KINDS)
    if unknown:
        sys.exit(f"--kinds: unknown {', '.join(sorted(unknown))}; kinds: {', '.join(KINDS)}")
    return lambda kind: kind in chosen


def run(args: argparse.Namespace) -> dict:
    """The suite's kinds (unless ``--skip-suite``), then the issue-16 kinds of
    ``soundness_redteam.py``, in the same scratch project."""
    want = wanted(args.kinds)
    t0 = time.monotonic()
    project = replay.PROJECTS[args.project]
    skip = args.skip_suite or not any(want(k) for k in SUITE_KINDS)
    if skip:
        # No suite: the kinds run with this interpreter and the memotest beside it.
        data = {
            "project": "none (--skip-suite)",
            "version": "",
            "targets": {"pytest": 0, "copy": 0, "extra": 0},
            "not_auditable": {},
            "builds": 0,
            "cases": [],
        }
        base = replay.BENCH / "soundness" / "redteam" / "project"
        py = sys.executable
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("PYTEST_", "PYTHON", "MEMOTEST", "COV_"))
        }
    else:
        audit = Audit(project, args.version or project.releases[-1], args.jobs, want)
        data = run_suite(args, audit)
        base, py, env = audit.root, audit.py, audit.env
    if any(want(k) for k in redteam.KINDS):
        memotest = str(Path(py).parent / "memotest")
        rt = redteam.RedTeam(base, py, memotest, env, args.jobs, log)
        log(f"== the issue-16 kinds in {rt.base}")
        data["cases"] += redteam.run(rt, want)
        data["builds"] += rt.builds
        data["not_auditable"].update({f"redteam:{t}": w for t, w in rt.not_auditable.items()})
        data["targets"]["extra"] += len({c["target"] for c in rt.results})
    if any(want(k) for k in order.KINDS):
        rt = redteam.RedTeam(base, py, str(Path(py).parent / "memotest"), env, args.jobs, log)
        log(f"== the order kinds in {rt.base.parent / 'order'}")
        cases = order.run(rt, want)
        data["cases"] += cases
        data["builds"] += rt.builds
        data["targets"]["extra"] += len({c["target"] for c in cases})
    data["duration"] = round(time.monotonic() - t0, 1)
    data["command"] = " ".join(["python", "benchmarks/soundness.py", *sys.argv[1:]])
    data["kinds"] = [k for k in KINDS if want(k) and not (skip and k in SUITE_KINDS)]
    return data


def run_suite(args: argparse.Namespace, audit: Audit) -> dict:
    """The kinds 1-18, on the suite of ``args.project``."""
    project, version, want = audit.project, audit.version, audit.want
    t0 = time.monotonic()
    log(f"== {project.name} {version}: setting up {audit.root.relative_to(REPO)}")
    audit.setup()
    # Baseline: everything built; a second build shows which results are reused. The
    # --pytest targets are built twice first: the second time forked from a worker that
    # preloads what the first build's runs imported (memotest/tracer/warm/preload.py).
    audit.build([], toml=False)
    audit.build([], toml=False, force=True)
    audit.build([], toml=True)
    base_pytest = audit.build([], toml=False)
    base_toml = audit.build([], toml=True)
    if not base_pytest or not base_toml:
        sys.exit(f"the baseline builds failed: see {audit.work}")
    records = audit.records()
    never_cached = {
        t: records.get(t, {}).get("why") or reason
        for t, (status, reason) in {**base_pytest, **base_toml}.items()
        if status != "cached"
    }
    for t, why in sorted(never_cached.items()):
        log(f"  not auditable (its result is never reused): {t}: {why}")
    pytest_targets = [t for t in audit.pytest_targets if t not in never_cached]
    copy_targets = [t for t in audit.copy_targets if t not in never_cached]
    if args.sample and args.sample < len(pytest_targets):
        rng = random.Random(args.seed)
        chosen = set(rng.sample(range(len(pytest_targets)), args.sample))
        pytest_targets = [t for i, t in enumerate(pytest_targets) if i in chosen]
        copy_targets = [t for i, t in enumerate(copy_targets) if i in chosen]
    results: list[dict] = []
    root = audit.root
    tests = str(root / project.tests) + "/"
    package = str(root / project.import_root) + "/"

    def rel(p: str) -> str:
        return os.path.relpath(p, root)

    def add_to_listed(t: str, i: int, *, toml: bool) -> None:
        listed = {p for k, p in records[t]["inputs"] if k == "list"}
        dirs = [p for p in listed if audit.inside(p + "/") and "__pycache__" not in p]
        # The deepest listed folders first: the most specific to this target.
        dirs.sort(key=lambda p: (-p.count("/"), p))
        if dirs:
            folder = dirs[i % min(len(dirs), 3)]
            path = os.path.join(folder, "soundness_probe.txt")
            change, undo = file_create(Path(path))
            results.append(
                audit.case("add-to-listed", t, change, undo, toml=toml, detail=rel(path))
            )

    # 1, 3, 4: the --pytest targets (4 also on the copy@ targets, fresh runs: a forked
    # run's folders are mostly held by the entries it looked for, 15 and 16).
    for i, t in enumerate(pytest_targets):
        inputs = records[t]["inputs"]
        files = [p for k, p in inputs if k == "file" and audit.inside(p)]
        sources = [p for p in files if p.startswith(package) and p.endswith(".py")]
        path = pick(sources, i) or pick([p for p in files if p.endswith(".py")], i)
        change, undo = file_edit(Path(path), b"\n# soundness audit\n")
        results.append(audit.case("edit", t, change, undo, toml=False, detail=rel(path)))

        listed = {p for k, p in inputs if k == "list"}
        absent = [
            p
            for k, p in inputs
            if k == "absent"
            and audit.inside(p)
            and not p.endswith(HARMFUL_ABSENT)
            and "/.bench-meta" not in p
            and not p.startswith(str(audit.extra) + "/")
            and not os.path.exists(p)
        ]
        unlisted = [p for p in absent if os.path.dirname(p) not in listed]
        path = pick(unlisted, i) or pick(absent, i)
        if path:
            change, undo = file_create(Path(path))
            results.append(
                audit.case("create-absent", t, change, undo, toml=False, detail=rel(path))
            )
        add_to_listed(t, i, toml=False)
    # 15, 16: the folders held by the entries their readers looked for.
    for i, t in enumerate(pytest_targets):
        entries = {p: e for p, e in records[t].get("entries", {}).items() if audit.inside(p + "/")}
        folders = sorted(entries, key=lambda p: (-p.count("/"), p))
        if not folders:
            continue
        folder = folders[i % min(len(folders), 3)]
        looked = entries[folder]
        present = set(looked["present"]) | set(os.listdir(folder))
        names = [
            n for n in looked["looks"] if n not in present and "." not in n and n.isidentifier()
        ]
        names += [
            p.removeprefix("i:").replace("*", "soundness_probe")
            for p in looked["patterns"]
            if not any(c in p for c in "?[]")
        ]
        name = pick([n for n in names if n not in present], i)
        if name:
            path = Path(folder) / name
            change, undo = dir_create(path)
            results.append(
                audit.case("entries-looked-for", t, change, undo, toml=False, detail=rel(str(path)))
            )
        path = Path(folder) / "soundness-unrelated.txt"
        change, undo = file_create(path)
        results.append(
            audit.case("entries-other", t, change, undo, toml=False, detail=rel(str(path)))
        )
    # 17, 18: the pyproject.toml held by its tool.pytest table.
    pyproject = root / "pyproject.toml"
    header = "[tool.pytest.ini_options]\n"
    for t in pytest_targets:
        if ("section", str(pyproject)) not in {tuple(x) for x in records[t]["inputs"]}:
            continue
        text = pyproject.read_text()
        if header in text:
            new = text.replace(header, header + 'console_output_style = "classic"\n', 1)
            change, undo = text_change(pyproject, new)
            detail = "pyproject.toml: a key added to [tool.pytest.ini_options]"
            results.append(audit.case("section-pytest", t, change, undo, toml=False, detail=detail))
        new = text + '\n[tool.soundness-probe]\nanything = "1"\n'
        change, undo = text_change(pyproject, new)
        detail = "pyproject.toml: a [tool.soundness-probe] table appended"
        results.append(audit.case("section-other", t, change, undo, toml=False, detail=detail))
    # 12, 13, 14: the files held by the code of them that ran.
    for i, t in enumerate(pytest_targets):
        code = {p: keys for p, keys in records[t].get("code", {}).items() if audit.inside(p)}
        if not code:
            continue
        files = sorted(code)
        files = files[i % len(files) :] + files[: i % len(files)]  # a different one first
        for kind, want_ran in (("code-ran", True), ("code-not-ran", False)):
            for path in files:
                ran = {k.rsplit("#", 1)[0] for k in code[path]}
                points = probe_points(Path(path))
                name = pick([n for n in points if (n in ran) == want_ran], i)
                if name:
                    change, undo = probe_edit(Path(path), points[name])
                    detail = f"{rel(path)}: {name}"
                    results.append(audit.case(kind, t, change, undo, toml=False, detail=detail))
                    break
        change, undo = file_edit(Path(files[0]), b"\n_soundness_probe = 1\n")
        results.append(audit.case("code-module", t, change, undo, toml=False, detail=rel(files[0])))
    # 9: a file only the warm worker read: the --pytest targets are forked from a process
    # that imported pytest and its plugins (memotest/tracer/warm/), so pluggy's modules
    # are read by that process, not by the run.
    venv = str(audit.venv) + "/"
    for i, t in enumerate(pytest_targets):
        inputs = records[t]["inputs"]
        worker = [
            p
            for k, p in inputs
            if k == "file"
            and p.startswith(venv)
            and "/site-packages/pluggy/" in p
            and p.endswith(".py")
        ]
        path = pick(worker, i)
        if path:
            change, undo = file_edit_in_place(Path(path), b"\n# soundness audit\n")
            detail = os.path.relpath(path, audit.venv)
            results.append(audit.case("worker", t, change, undo, toml=False, detail=detail))
    # 10: a library the worker preloaded (memotest/tracer/warm/preload.py): from the second
    # build on, the worker imports what the runs of the first reported.
    preloaded = preloaded_packages(audit.root)
    site = next(audit.venv.glob("lib/python*/site-packages"), audit.venv)
    skip = {"pluggy", "_pytest", "pytest", "py", "iniconfig", "packaging"}  # pytest's own
    for i, t in enumerate(pytest_targets):
        inputs = records[t]["inputs"]
        libs = []
        for k, p in inputs:
            if k != "file" or not p.endswith(".py") or not p.startswith(f"{site}/"):
                continue
            top = os.path.relpath(p, site).split("/", 1)[0].removesuffix(".py")
            if top in preloaded and top not in skip:
                libs.append(p)
        path = pick(libs, i)
        if path:
            change, undo = file_edit_in_place(Path(path), b"\n# soundness audit\n")
            detail = os.path.relpath(path, audit.venv)
            results.append(audit.case("preloaded", t, change, undo, toml=False, detail=detail))
    # 2 and 8: the copy@ targets (and 8 on the extra targets too).
    for i, t in enumerate(copy_targets):
        inputs = records[t]["inputs"]
        files = [p for k, p in inputs if k == "file" and audit.inside(p)]
        sources = [
            p for p in files if p.endswith(".py") and (p.startswith(package) or p.startswith(tests))
        ]
        path = pick([p for p in sources if p.startswith(package)], i) or pick(sources, i)
        change, undo = file_delete(Path(path))
        results.append(audit.case("delete", t, change, undo, toml=True, detail=rel(path)))
        add_to_listed(t, i, toml=True)
    toml_file = audit.extra / "memotest.toml"
    for t in [*copy_targets, *audit.extra_targets, "shared-object"]:
        text = toml_file.read_text()
        header = f"[targets.{json.dumps(t) if '@' in t else t}]\n"
        new = text.replace(header, header + 'env = { SOUNDNESS_DEFINITION = "1" }\n', 1)
        assert new != text, header

        def change(new: str = new) -> None:
            toml_file.write_text(new)

        def undo(text: str = text) -> None:
            toml_file.write_text(text)

        results.append(
            audit.case("definition", t, change, undo, toml=True, detail="env gains a variable")
        )
    # 5 and 6: the extra targets.
    for t in audit.extra_targets:
        name = {
            "grandchild-python": "grand-python.txt",
            "grandchild-cat": "grand-cat.txt",
            "grandchild-env-i": "grand-envi.txt",
        }[t]
        change, undo = file_edit(audit.extra / "data" / name, b"two\n")
        results.append(
            audit.case("grandchild", t, change, undo, toml=True, detail=f"extra/data/{name}")
        )
    change, undo = file_edit(audit.extra / "lib" / "libcopy.so", b"\0soundness audit\0")
    results.append(
        audit.case(
            "shared-object",
            "shared-object",
            change,
            undo,
            toml=True,
            detail=f"extra/lib/libcopy.so (a copy of {audit.copied_library}), bytes appended",
        )
    )
    everyone = [
        *pytest_targets,
        *[t for t in [*copy_targets, *audit.extra_targets, "shared-object"]],
    ]
    # 7: a pass_env variable, every target at once (then unset and settled).
    if want("pass-env"):
        probe = {PROBE_VAR: "1"}
        seen = audit.build([], toml=False, env_extra=probe)
        seen.update(audit.build([], toml=True, env_extra=probe))
        for t in everyone:
            status, reason = seen.get(t, ("missing", ""))
            results.append(
                {
                    "kind": "pass-env",
                    "target": t,
                    "change": f"{PROBE_VAR}=1",
                    "status": status,
                    "reason": reason,
                    "ok": status not in ("cached", "refused", "missing"),
                }
            )
        audit.build([], toml=False)
        audit.build([], toml=True)
    # 10: unrelated changes, every target must stay cached.
    if want("unrelated"):
        records = audit.records()
        all_inputs = {p for r in records.values() for _, p in r["inputs"]}
        all_listed = {p for r in records.values() for k, p in r["inputs"] if k == "list"}
        harness = {".memotest", "__pycache__", ".bench-meta", "extra"}
        folders = sorted(
            str(d)
            for d in root.rglob("*")
            if d.is_dir()
            and str(d) not in all_listed
            and str(d) not in all_inputs
            and not harness & set(d.relative_to(root).parts)
        )
        # A file no target read, preferably beside files they did read (in a folder they
        # listed: its content changes, its name does not, so the listing still holds).
        untouched = sorted(
            (str(f.parent) not in all_listed, str(f))
            for f in root.rglob("*")
            if f.is_file()
            and str(f) not in all_inputs
            and not harness & set(f.relative_to(root).parts)
        )
        untouched = [f for _, f in untouched]
        if folders and untouched:
            new_file = Path(folders[0]) / "soundness_unrelated.txt"
            edited = Path(untouched[0])
            original = edited.read_bytes()
            new_file.write_text("unrelated\n")
            edited.write_bytes(original + b"\nunrelated change\n")
            seen = audit.build([], toml=False)
            seen.update(audit.build([], toml=True))
            new_file.unlink()
            edited.write_bytes(original)
            detail = f"created {rel(str(new_file))}, appended to {rel(str(edited))}"
            for t in everyone:
                status, reason = seen.get(t, ("missing", ""))
                results.append(
                    {
                        "kind": "unrelated",
                        "target": t,
                        "change": detail,
                        "status": status,
                        "reason": reason,
                        "ok": status == "cached",
                    }
                )
    duration = time.monotonic() - t0
    return {
        "command": " ".join(["python", "benchmarks/soundness.py", *sys.argv[1:]]),
        "project": project.name,
        "version": version,
        "targets": {
            "pytest": len(audit.pytest_targets),
            "copy": len(audit.copy_targets),
            "extra": len(audit.extra_targets) + 1,
        },
        "not_auditable": never_cached,
        "sampled": bool(args.sample),
        "builds": audit.builds,
        "duration": round(duration, 1),
        "machine": {"cpus": os.cpu_count(), "loadavg_end": os.getloadavg()},
        "cases": [c for c in results if c is not None],
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--project", default="structlog", choices=sorted(replay.PROJECTS))
    ap.add_argument("--version", default=None, help="default: the project's latest listed")
    ap.add_argument("--sample", type=int, default=0, help="audit N targets only (default all)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("-j", "--jobs", type=int, default=2, help="memotest build -jN")
    ap.add_argument(
        "--out",
        type=Path,
        default=None,
        help="default: benchmarks/results/soundness.json (soundness-kinds.json with --kinds "
        "or --skip-suite)",
    )
    ap.add_argument(
        "--kinds",
        default=None,
        help="audit these kinds only (comma-separated; default all): "
        "e.g. --kinds service,umask --skip-suite",
    )
    ap.add_argument(
        "--skip-suite",
        action="store_true",
        help="no suite: the issue-16 kinds alone, with this interpreter's memotest",
    )
    args = ap.parse_args()
    if args.out is None:
        partial = args.kinds or args.skip_suite
        args.out = RESULTS / ("soundness-kinds.json" if partial else "soundness.json")
    data = run(args)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(data, indent=1) + "\n")
    log(
        f"\n{data['project']} {data['version']}: {data['targets']['pytest']} --pytest targets, "
        f"{data['targets']['copy']} memotest.toml copies, {data['targets']['extra']} extra "
        f"targets; {data['builds']} builds in {data['duration']:.0f}s"
    )
    bad = 0
    for kind in data["kinds"]:
        cases = [c for c in data["cases"] if c["kind"] == kind]
        ok = sum(c["ok"] for c in cases)
        word = "stayed cached" if kind in EXPECT_CACHED else "re-ran"
        word = "agreed with the file run whole" if kind in order.KINDS else word
        log(f"{kind}: {word} {ok}/{len(cases)}")
        for c in cases:
            if c.get("known"):
                log(f"  KNOWN {c['target']}: {c['change']}: {c['status']} ({c['reason']})")
            elif not c["ok"]:
                bad += 1
                log(f"  FAIL {c['target']}: {c['change']}: {c['status']} ({c['reason']})")
    for c in data["cases"]:
        if c["kind"] not in data["kinds"] and not c["ok"]:  # a baseline that must not be
            bad += 1
            log(f"  FAIL {c['target']}: {c['kind']}: {c['status']} ({c['reason']})")
    if data["not_auditable"]:
        log(f"not auditable (never reused): {len(data['not_auditable'])}")
        for t, why in sorted(data["not_auditable"].items()):
            log(f"  {t}: {why}")
    log(f"wrote {args.out.relative_to(REPO) if args.out.is_relative_to(REPO) else args.out}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
