"""History replay: memotest against RetestAll and pytest-testmon on real projects' releases.

For each project, successive releases from PyPI (sdists, which ship the test suites) are laid
one after the other into working folders, as ``git checkout`` would: changed files are
rewritten, files removed by the release are deleted, every other file keeps its content and
its times. At each revision, in one run:

* **pytest**: the user's own command, one process: ``python -m pytest -q -p no:cacheprovider
  --continue-on-collection-errors TESTS`` (the flag, as for testmon, keeps one file that
  cannot be collected from stopping the session); **every ratio printed and the plot are
  to its wall time**;
* **pytest -n 2**: the same with pytest-xdist on the two cores (``-n 2``);
* **RetestAll**: every test file pytest collects, one process per file, sequential, as
  memotest runs them (``python -m pytest -q -p no:cacheprovider FILE``), without memotest;
  kept in the JSON (and its ratio printed) and the reference of the agreement check;
* **memotest -j1** and **memotest -j2**: ``memotest build -jN --pytest TESTS``;
* **memotest -j2 --select tests**: test-level selection (opt-in, issue 18), its own store;
* **pytest-testmon**: ``python -m pytest --testmon --continue-on-collection-errors -q -rfE
  TESTS``.

Each tool has its own working folder ("lane") under ``$TMPDIR/memotest-bench/PROJECT/``
(``MEMOTEST_BENCH_WORK`` to choose another; not inside this repository, whose own pytest
configuration a project without one would otherwise pick up), and every
lane receives exactly the same files at each revision. A lane is one developer's checkout:
its tool's state (memotest's ``.memotest/`` store, testmon's ``.testmondata``, pytest's and
hypothesis's caches) is carried over from revision to revision and seen by no other tool.
So -j1 and -j2 each carry their own store over the history (one store shared by both would
make the second build of a revision a no-op), and neither memotest's targets nor RetestAll
ever observe ``.testmondata`` or another tool's ``.hypothesis`` folder. That matters: pytest
stats every entry of its rootdir, memotest fingerprints a stat'ed file by its content, and
``.testmondata`` is rewritten by every testmon run, so in one shared folder testmon alone
would re-run every memotest target at every revision.

The package is imported from the lane (``PYTHONPATH=<lane>/src`` or the lane itself),
never installed. Projects that read their own version from installed metadata
(``importlib.metadata``) get what ``pip install -e .`` run once, at the first revision,
would give them: the first release's ``PKG-INFO`` as
``<lane>/.bench-meta/NAME.dist-info/METADATA``, on ``PYTHONPATH`` too, left as it is
afterwards (a developer does not reinstall at every checkout; a metadata version that
changed at every release would also make testmon, which keys its data on the installed
packages' versions, re-run everything). Its ``entry_points.txt``, through which the
OpenStack projects find their own plugins, is each release's own: a release that adds a
plugin also adds its entry point, and its tests of that plugin fail without it
(keystoneauth1's ``loading/test_v3.py`` from 5.2.0 on), as a developer who did not
reinstall would see and fix by reinstalling.

Checked at each revision (**outcome agreement**): every test file that fails under
RetestAll was run, and failed, under memotest (-j1 and -j2). Any other outcome is listed as
a disagreement with memotest's reason for skipping or its status. A file whose outcome
differs between RetestAll and one pytest session (one process, or ``-n 2``) is listed as an
order difference: a test that depends on what another file's tests did before it. And test
by test (``benchmarks/replay_tests.py``, from each lane's JUnit XML): every test that fails
with its file alone must fail under memotest's default lanes; under ``--select tests`` a test
that fails with its whole file but passes when only part of the file ran is listed as order
dependence within the file, any other difference as a disagreement.

Writes ``benchmarks/results/replay.json`` and the plot ``docs/img/replay.png`` (time per
revision relative to one-process pytest's, one panel per project). The plot needs
matplotlib, a benchmark-only dependency the script installs into its own venv,
``.bench/venv-plot``. Downloads, extracted sources, the per-project venvs (memotest
installed editable from this repository, pytest, pytest-testmon, pytest-xdist and the
project's test requirements, pinned below) live in ``.bench/`` at the repository root.

Run::

    python benchmarks/replay.py                    # every project, 10 releases each
    python benchmarks/replay.py --quick            # 2 projects x 3 releases (smoke run)
    python benchmarks/replay.py --projects structlog --revisions 4
    python benchmarks/replay.py --projects keystoneauth1 --lanes retest,pytest,j1,j2 \
        --out /tmp/ks.json --plot /tmp/ks.png    # files re-run and agreement only

``--quick`` writes ``benchmarks/results/replay-quick.json`` and ``.bench/replay-quick.png``
so that a smoke run never overwrites the figures of a full run. Exit status 0 when there is
no disagreement, 1 otherwise.

Releases are far apart: on structlog every one re-runs every target. A developer's loop,
commit by commit from a project's git history, is ``benchmarks/replay_git.py``'s (it
reuses this module's venvs, lanes and tools).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import replay_tests

REPO = Path(__file__).resolve().parents[1]
BENCH = REPO / ".bench"
RESULTS = REPO / "benchmarks" / "results"
PLOT = REPO / "docs" / "img" / "replay.png"
RUN_TIMEOUT = 900
#: The working folders ("lanes"). Not under this repository: a project without a pytest
#: configuration file of its own would find this repository's pyproject.toml above its
#: checkout, and pytest would take this repository as its rootdir.
WORK = Path(os.environ.get("MEMOTEST_BENCH_WORK") or Path(tempfile.gettempdir()) / "memotest-bench")
#: Each tool's output at each revision: .bench/logs/<results file stem>/PROJECT/VERSION/
LOGS = BENCH / "logs" / "replay"

# Installed into every project's venv, besides memotest (editable, from this repository).
COMMON_REQUIREMENTS = [
    "pytest-testmon==2.2.0",
    "coverage==7.17.3",
    "pytest-xdist==3.8.0",
    "execnet==2.1.2",
]
PLOT_REQUIREMENTS = ["matplotlib"]


@dataclass(frozen=True)
class Project:
    name: str  # the PyPI name
    import_root: str  # the folder put on PYTHONPATH, relative to the checkout
    tests: str  # the tests folder given to pytest, testmon and memotest
    releases: tuple[str, ...]  # successive releases, oldest first
    requirements: tuple[str, ...]  # the test requirements (pinned)
    why: str
    metadata: bool = True  # give the lane the release's metadata (see the module doc)
    pytest: str = "pytest==9.2.0"
    #: programs some tests run, with the Debian package that has each (not installed by this
    #: script: without them those tests fail under every tool alike, which the summary shows
    #: as failing files; a note says so at the start)
    programs: tuple[tuple[str, str], ...] = ()
    #: programs the venv's build needs (a requirement built from its sdist), with the Debian
    #: package that has each: checked before the venv is made, the run stops without them
    build_programs: tuple[tuple[str, str], ...] = ()


PROJECTS: dict[str, Project] = {
    p.name: p
    for p in (
        Project(
            name="structlog",
            import_root="src",
            tests="tests",
            releases=(
                "23.1.0",
                "23.2.0",
                "23.3.0",
                "24.1.0",
                "24.2.0",
                "24.3.0",
                "24.4.0",
                "25.1.0",
                "25.2.0",
                "25.3.0",
                "25.4.0",
                "25.5.0",
                "26.1.0",
            ),
            requirements=(
                "pytest-asyncio==1.5.0",
                "simplejson==4.3.0",
                "time-machine==3.6.0",
                "freezegun==1.5.5",
                "pretend==1.0.9",
            ),
            why="15-16 test files, ~900 tests in ~2 s; pure Python, no runtime dependency; "
            "the version comes from installed metadata, not from a source file; some "
            "releases change only a few modules or only the docs",
        ),
        Project(
            name="attrs",
            import_root="src",
            tests="tests",
            releases=(
                "22.2.0",
                "23.1.0",
                "23.2.0",
                "24.1.0",
                "24.2.0",
                "24.3.0",
                "25.1.0",
                "25.2.0",
                "25.3.0",
                "25.4.0",
                "26.1.0",
            ),
            requirements=("hypothesis==6.170.15", "cloudpickle==3.1.2", "Pympler==1.1"),
            why="24 test files, ~1,350 tests (hypothesis) in ~7 s; pure Python, no runtime "
            "dependency; the version comes from installed metadata",
        ),
        Project(
            name="click",
            import_root="src",
            tests="tests",
            releases=(
                "8.1.8",
                "8.2.0",
                "8.2.1",
                "8.3.0",
                "8.3.1",
                "8.3.2",
                "8.3.3",
                "8.4.0",
                "8.4.1",
                "8.4.2",
                "8.5.0",
                "8.5.1",
            ),
            requirements=(),
            # click 8.2.1-8.4.2's test_basic.py parametrizes with an iterator, an error since
            # pytest 9 (a collection error: `memotest build --pytest` then runs nothing);
            # pytest 8.3 is what those releases were tested with.
            pytest="pytest==8.3.5",
            why="20 to 43 test files, ~750 to 2,450 tests in ~4 s; pure Python, pytest only; "
            "the version comes from installed metadata since 8.2",
        ),
        Project(
            name="oslo.utils",
            import_root=".",
            tests="oslo_utils/tests",
            releases=(
                "6.0.0",
                "6.0.1",
                "6.0.2",
                "6.1.0",
                "6.2.0",
                "6.2.1",
                "6.3.0",
                "7.0.0",
                "7.1.0",
                "7.2.0",
                "7.3.0",
                "7.3.1",
                "7.4.0",
                "8.0.0",
            ),
            requirements=(
                # the package's own requirements (it is imported from the checkout)
                "iso8601==2.1.0",
                "oslo.i18n==6.9.0",
                "netaddr==0.10.1",  # 1.x breaks test_netutils.py up to 7.3.1
                "debtcollector==3.1.0",
                "pyparsing==3.3.3",
                "packaging==26.3",
                "tzdata==2026.6",
                "PyYAML==6.0.3",
                "psutil==7.2.2",
                "pbr==7.1.3",
                "netifaces==0.11.0",  # up to 7.3: test_netutils imports it
                "pytz==2026.6",  # older releases
                # test-requirements.txt
                "eventlet==0.41.3",
                "fixtures==4.3.2",
                "testscenarios==0.7.0",
                "testtools==2.9.1",
                "oslotest==6.1.1",
                "ddt==1.7.2",
                "oslo.config==10.7.0",
            ),
            # bindep.txt: Debian's qemu-utils, for imageutils' tests. Left out on purpose:
            # with it, test_format_inspector.py alone takes 46 s, and over 4 minutes under
            # testmon's coverage, which would make a run of this project take over an hour;
            # without it, the files of those tests fail fast under every tool alike.
            # (test_imageutils.py, from 7.3 imageutils/test_qemu.py, fail anyway: pytest
            # ignores their load_tests, so testscenarios never applies their scenarios.)
            programs=(("qemu-img", "qemu-utils"),),
            why="15-16 test files, one per module of independent utilities (strutils, "
            "netutils, timeutils...), ~490 tests in ~3.5 s; pure Python; an empty "
            "__init__.py, the version from pbr (installed metadata), no pytest "
            "configuration file: a release that leaves a module alone leaves its tests "
            "alone",
        ),
        Project(
            name="cliff",
            import_root=".",
            tests="cliff/tests",
            releases=(
                "4.0.0",
                "4.1.0",
                "4.2.0",
                "4.3.0",
                "4.4.0",
                "4.5.0",
                "4.6.0",
                "4.7.0",
                "4.8.0",
                "4.9.0",
                "4.9.1",
                "4.10.0",
            ),
            requirements=(
                "autopage==0.6.0",
                "cmd2==2.5.11",
                "PrettyTable==3.18.0",
                "stevedore==5.10.0",
                "PyYAML==6.0.3",
                "pbr==7.1.3",
                "testtools==2.9.1",
                "testscenarios==0.7.0",
                "fixtures==4.3.2",
                "Sphinx==9.0.4",  # test_sphinxext.py
                "importlib-metadata==10.2.0",  # older cliff imports the backport
            ),
            why="19 test files, one per module of a command-line framework (app, "
            "commandmanager, formatters, columns...); pure Python; empty __init__.py, the "
            "version from pbr, no pytest configuration file; the shared test base "
            "(tests/base.py) and command.py reach about half of the files",
        ),
        Project(
            name="keystoneauth1",
            import_root=".",
            tests="keystoneauth1/tests/unit",
            releases=(
                "5.0.0",
                "5.0.1",
                "5.1.0",
                "5.1.1",
                "5.1.2",
                "5.1.3",
                "5.2.0",
                "5.2.1",
                "5.3.0",
                "5.3.1",
                "5.4.0",
                "5.5.0",
            ),
            requirements=(
                "pbr==7.1.3",
                "iso8601==2.1.0",
                "requests==2.34.2",
                "stevedore==5.10.0",
                "os-service-types==1.9.0",
                "fixtures==4.3.2",
                "oslo.config==10.7.0",
                "oslo.utils==9.2.0",
                "oslotest==6.1.1",
                "betamax==0.9.0",
                "requests-mock==1.12.1",
                "testresources==2.1.2",
                "testtools==2.9.1",
                "PyYAML==6.0.3",
                "lxml==6.1.3",
                "oauthlib==4.0.1",
                # test_hacking_checks.py imports hacking (test-requirements.txt: hacking~=6.1.0
                # in 5.5.0, ~=4.1.0 before); hacking 6.1 needs flake8 6.1, pycodestyle 2.11
                "hacking==6.1.0",
                "flake8==6.1.0",
                "pycodestyle==2.11.1",
                # test_betamax_fixture.py: urllib3 2 enforces Content-Length, which the body
                # of the recorded cassette does not match (IncompleteRead)
                "urllib3==1.26.20",
                "six==1.17.0",  # up to 5.1
                # test-requirements.txt ([kerberos] extra), for test_fedkerb_loading.py's
                # test_load: it needs pyspnego[kerberos], i.e. gssapi and krb5, which have
                # no Linux wheels and build against libkrb5-dev (build_programs)
                "requests-kerberos==0.15.0",
                "pyspnego==0.12.4",
                "gssapi==1.12.0",
                "krb5==0.10.0",
                "cryptography==50.0.2",
                "decorator==5.3.1",
            ),
            build_programs=(("krb5-config", "libkrb5-dev"), ("gcc", "gcc")),
            why="45 test files for OpenStack's authentication library (plugins, session, "
            "access, discovery, loading...), ~1,700 tests; pure Python; the version from "
            "pbr, no pytest configuration file; session.py reaches most files",
        ),
    )
}
#: The lanes (see the module doc), each its own working folder.
LANES = ("retest", "pytest", "xdist", "j1", "j2", "sel", "testmon")
#: The memotest lanes: their build flags.
BUILDS = {"j1": ["-j1"], "j2": ["-j2"], "sel": ["-j2", "--select", "tests"]}
#: The lanes every run has (the summary's selection, agreement and ratios need them); the
#: others can be left out (``--lanes``) for a quicker run that answers "which files re-ran,
#: and did any outcome differ".
REQUIRED_LANES = ("retest", "pytest", "j1", "j2")
#: The lanes this run has (``--lanes``).
SELECTED = set(LANES)
NAN = {"wall": float("nan")}
#: What every ratio is to: one-process pytest, the user's own command. Results files from
#: before that lane have RetestAll instead (``base``).
BASE = "pytest"
#: The lanes whose ratios to the base are printed, with their labels.
COMPARED = (
    ("xdist", "pytest -n 2"),
    ("j1", "memotest -j1"),
    ("j2", "memotest -j2"),
    ("sel", "memotest -j2 --select tests"),
)
DEFAULT_PROJECTS = ("oslo.utils", "cliff", "keystoneauth1", "structlog", "attrs", "click")
QUICK_PROJECTS = ("oslo.utils", "structlog")

# Runs inside the project's venv: pytest's collection, as JSON (the files with tests, and
# the files that could not be collected, which RetestAll runs and sees fail).
COLLECT = r"""
import json, sys, pytest
files, errors, n = set(), set(), [0]
class P:
    def pytest_collectreport(self, report):
        if report.failed:
            errors.add(report.nodeid.split("::")[0])
    def pytest_collection_finish(self, session):
        n[0] = len(session.items)
        for item in session.items:
            files.add(str(getattr(item, "path", None) or item.fspath))
code = pytest.main(["--collect-only", "-q", "-p", "no:cacheprovider", sys.argv[2]], plugins=[P()])
json.dump({"exit": int(code), "files": sorted(files), "errors": sorted(errors), "n": n[0]},
          open(sys.argv[1], "w"))
"""

# Runs inside the project's venv before a memotest build: for each stored record, the
# recorded inputs that the new release changed (a file's content, an absent path that
# appeared, a listed folder that gained or lost entries): why the target will re-run.
ATTRIBUTE = r"""
import json, os, sys
from memotest.world.fingerprint import FileStates
from memotest.inputs.check import holds
from memotest.store import Store
root, spec = sys.argv[1], json.load(open(sys.argv[2]))
changed = set(spec["changed"]) | set(spec["removed"])
added = set(spec["added"])
parents = {os.path.dirname(p) for p in added | set(spec["removed"])}
out = {}
st = Store.open(root, lock=False)
states = FileStates()
states.blobs = st.read_blob
try:
    for name, rec in st.records().items():
        causes = []
        for fp in rec.inputs:
            kind = fp.kind.value
            if kind in ("file", "dir") and fp.path in changed:
                causes.append(fp.path)
            elif kind in ("code", "section") and fp.path in changed and not holds(states, fp):
                causes.append(fp.path)  # the code of it that ran, or pytest's table, changed
            elif kind == "absent" and fp.path in added:
                causes.append(fp.path)
            elif kind == "list" and fp.path in parents:
                causes.append(fp.path + "/")
            elif kind == "entries" and fp.path in parents and not holds(states, fp):
                causes.append(fp.path + "/")  # an entry its readers looked for came or went
        out[name] = {"status": rec.status, "cacheable": rec.cacheable, "causes": causes}
finally:
    st.close()
json.dump(out, open(sys.argv[3], "w"))
"""

PLOT_SCRIPT = r"""
import json, sys
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
data = json.load(open(sys.argv[1]))
names = list(data["projects"])
fig, axes = plt.subplots(len(names), 1, figsize=(10, 3.3 * len(names)), squeeze=False)
series = [("retest", "RetestAll (one process per file)", "black", "o"),
          ("xdist", "pytest -n 2", "tab:green", "v"),
          ("j1", "memotest -j1", "tab:blue", "s"),
          ("j2", "memotest -j2", "tab:cyan", "D"),
          ("sel", "memotest -j2 --select tests", "tab:purple", "P"),
          ("testmon", "pytest-testmon", "tab:orange", "^")]
for ax, name in zip(axes[:, 0], names):
    revs = data["projects"][name]["revisions"]
    base = "pytest" if "pytest" in revs[0] else "retest"
    xs = list(range(len(revs)))
    ax.axhline(1.0, color="grey", linestyle="--", linewidth=1,
               label="one-process pytest" if base == "pytest" else "RetestAll")
    for key, label, color, marker in series:
        if key == base or key not in revs[0]:
            continue
        ax.plot(xs, [r[key]["wall"] / r[base]["wall"] for r in revs], label=label,
                color=color, marker=marker)
    for x, r in zip(xs, revs):
        text = ("%d/%d" % (r["j1"]["ran"], r["j1"]["total"]) if r["j1"]["exit"] != 2
                else "refused")
        ax.annotate(text, (x, r["j1"]["wall"] / r[base]["wall"]), textcoords="offset points",
                    xytext=(0, 6), ha="center", fontsize=7, color="tab:blue")
    ax.set_xticks(xs)
    ax.set_xticklabels(["%s\n%.1fs" % (r["version"], r[base]["wall"]) for r in revs],
                       fontsize=7)
    ax.set_ylabel("wall time / %s's" % ("pytest" if base == "pytest" else "RetestAll"))
    ax.set_ylim(bottom=0)
    ax.set_title("%s: time per release relative to %s (its seconds under each release; "
                 "memotest -j1 targets run / total above its points)"
                 % (name, "one-process pytest" if base == "pytest" else "RetestAll"),
                 fontsize=9)
    ax.grid(alpha=0.3)
handles, labels = axes[0, 0].get_legend_handles_labels()
fig.legend(handles, labels, loc="upper center", ncol=4, fontsize=8, frameon=False)
height = fig.get_size_inches()[1]
fig.tight_layout(rect=(0, 0, 1, 1 - 0.55 / height))  # two rows of legend above
fig.savefig(sys.argv[2], dpi=110)
"""


def log(msg: str) -> None:
    print(msg, flush=True)


def run(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, check=True, capture_output=True, text=True, **kw)


# ---------------------------------------------------------------- sources and venvs


def sdist(name: str, version: str) -> Path:
    """The release's sdist, downloaded once into .bench/sdists."""
    folder = BENCH / "sdists"
    folder.mkdir(parents=True, exist_ok=True)
    want = re.sub(r"[-_.]+", "-", name).lower()

    def find() -> Path | None:
        for p in folder.glob("*.tar.gz"):
            stem = p.name[: -len(".tar.gz")]
            base, _, ver = stem.rpartition("-")
            if re.sub(r"[-_.]+", "-", base).lower() == want and ver == version:
                return p
        return None

    found = find()
    if found is None:
        log(f"  downloading {name}=={version}")
        run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "-q",
                "--no-deps",
                "--no-binary",
                ":all:",
                f"{name}=={version}",
                "-d",
                str(folder),
            ]
        )
        found = find()
        if found is None:
            sys.exit(f"pip download {name}=={version}: no sdist saved in {folder}")
    return found


def extracted(name: str, version: str) -> Path:
    """The release's files, extracted once into .bench/src/NAME-VERSION (top folder
    stripped)."""
    dest = BENCH / "src" / f"{name}-{version}"
    if (dest / ".complete").exists():
        return dest
    shutil.rmtree(dest, ignore_errors=True)
    tmp = dest.with_name(dest.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    with tarfile.open(sdist(name, version)) as tar:
        kw = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}
        tar.extractall(tmp, **kw)
    (top,) = list(tmp.iterdir())
    top.rename(dest)
    tmp.rmdir()
    (dest / ".complete").touch()
    return dest


def release_files(root: Path) -> dict[str, Path]:
    """The files of an extracted release, as a checkout has them: without the
    ``*.egg-info`` folder setuptools adds to an sdist (a build artifact, ignored by git;
    on ``sys.path`` from the checkout it would be installed metadata whose version changes
    at every release, see the module doc)."""
    return {
        str(p.relative_to(root)): p
        for p in root.rglob("*")
        if (p.is_file() or p.is_symlink())
        and p.name != ".complete"
        and not p.relative_to(root).parts[0].endswith(".egg-info")
    }


def venv(project: Project) -> Path:
    """.bench/venv-NAME with memotest (editable), pytest, testmon and the test requirements;
    made once, and again when the requirements change."""
    path = BENCH / f"venv-{project.name}"
    reqs = [project.pytest, *COMMON_REQUIREMENTS, *project.requirements]
    stamp = path / "bench-requirements.json"
    wanted = json.dumps({"python": sys.version, "requirements": reqs})
    if stamp.exists() and stamp.read_text() == wanted:
        return path
    log(f"  making {path.relative_to(REPO)}")
    shutil.rmtree(path, ignore_errors=True)
    run([sys.executable, "-m", "venv", str(path)])
    py = str(path / "bin" / "python")
    run([py, "-m", "pip", "install", "-q", "-e", str(REPO), *reqs])
    stamp.write_text(wanted)
    return path


def freeze(path: Path) -> list[str]:
    out = run([str(path / "bin" / "python"), "-m", "pip", "freeze"]).stdout
    return [ln for ln in out.splitlines() if ln and not ln.startswith("-e")]


# ---------------------------------------------------------------- working folders


@dataclass
class Lane:
    """One working folder, fed the releases one after the other like a git checkout."""

    root: Path
    files: set[str] = field(default_factory=set)

    def checkout(self, src: dict[str, Path], meta: dict[str, bytes] | None, dist: str) -> dict:
        changed, added = [], []
        for rel, path in src.items():
            dest = self.root / rel
            data = path.read_bytes()
            if dest.is_file() and not dest.is_symlink():
                if dest.read_bytes() == data:
                    continue
                changed.append(rel)
            else:
                added.append(rel)
            dest.parent.mkdir(parents=True, exist_ok=True)
            if dest.is_symlink():
                dest.unlink()
            tmp = dest.with_name(dest.name + ".bench-tmp")
            tmp.write_bytes(data)
            os.chmod(tmp, path.stat().st_mode & 0o777)
            os.replace(tmp, dest)
        removed = sorted(self.files - set(src))
        for rel in removed:
            (self.root / rel).unlink(missing_ok=True)
            parent = (self.root / rel).parent
            while parent != self.root:
                try:
                    parent.rmdir()  # only when empty, as git does
                except OSError:
                    break
                parent = parent.parent
        self.files = set(src)
        for name, data in (meta or {}).items():
            info = self.root / ".bench-meta" / f"{dist}.dist-info" / name
            rel = str(info.relative_to(self.root))
            if not info.exists():
                info.parent.mkdir(parents=True, exist_ok=True)
                added.append(rel)
                info.write_bytes(data)
            elif info.read_bytes() != data:
                changed.append(rel)
                info.write_bytes(data)
        return {"changed": sorted(changed), "added": sorted(added), "removed": removed}


def installed_metadata(src_root: Path) -> dict[str, bytes]:
    """What ``pip install -e .`` of the release in ``src_root`` leaves in its ``.dist-info``
    (see the module doc): the metadata, and the entry points, through which stevedore finds
    the OpenStack projects' own plugins."""
    meta = {"METADATA": (src_root / "PKG-INFO").read_bytes()}
    for eps in sorted(src_root.glob("*.egg-info/entry_points.txt")):
        meta["entry_points.txt"] = eps.read_bytes()
    return meta


def environment(project: Project, lane: Path, venv_path: Path) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("PYTEST_", "PYTHON", "VIRTUAL_ENV", "MEMOTEST", "COV_"))
    }
    env["PATH"] = f"{venv_path / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}"
    paths = [str(lane / project.import_root)]
    if project.metadata:
        paths.append(str(lane / ".bench-meta"))
    env["PYTHONPATH"] = os.pathsep.join(paths)
    return env


# ---------------------------------------------------------------- the four measurements


def collect(py: str, lane: Path, tests: str, env: dict[str, str]) -> dict:
    out = lane.parent / "collect.json"
    t0 = time.monotonic()
    subprocess.run(
        [py, "-c", COLLECT, str(out), tests],
        cwd=lane,
        env=env,
        capture_output=True,
        timeout=RUN_TIMEOUT,
    )
    wall = time.monotonic() - t0
    data = json.loads(out.read_text())
    out.unlink()
    files = {os.path.relpath(f, lane) for f in data["files"]} | set(data["errors"])
    return {"files": sorted(files), "errors": data["errors"], "wall": wall, "tests": data["n"]}


#: The CPU seconds (user + system) of the last ``timed`` command's process tree: its
#: descendants that were waited for (``RUSAGE_CHILDREN``); read by benchmarks/replay_git.py.
last_cpu = 0.0


def timed(
    cmd: list[str], cwd: Path, env: dict, timeout: float = RUN_TIMEOUT
) -> tuple[float, subprocess.CompletedProcess]:
    """Runs a measured command (output captured as text, no stdin); its wall time too, and
    its CPU time in ``last_cpu``."""
    global last_cpu
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    proc = subprocess.run(
        cmd,
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        errors="replace",
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )
    wall = time.monotonic() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    last_cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    return wall, proc


#: The user's own command: pytest in one process, and pytest-xdist on the two cores. Like
#: testmon, a file that cannot be collected must not stop the session (see ``testmon``).
PYTEST_ARGS = ("-m", "pytest", "-q", "-p", "no:cacheprovider", "--continue-on-collection-errors")


def pytest_lane(py: str, lane: Path, tests: str, env: dict, logs: Path, workers: int) -> dict:
    """One pytest session over ``tests`` (``workers`` > 0: ``-n WORKERS``, pytest-xdist);
    the failing files from its short summary (pytest's default ``-rfE``), and for the
    one-process session the failing tests (its JUnit XML, see ``replay_tests``)."""
    junit = lane.parent / "junit-pytest.xml"
    junit.unlink(missing_ok=True)
    extra = ["-n", str(workers)] if workers else [f"--junitxml={junit}"]
    wall, proc = timed([py, *PYTEST_ARGS, *extra, tests], lane, env)
    out = proc.stdout + proc.stderr
    (logs / (f"pytest-n{workers}.txt" if workers else "pytest.txt")).write_text(out)
    result = {"wall": round(wall, 3), "exit": proc.returncode, **parse_testmon(out)}
    if not workers:
        result["failing_tests"] = replay_tests.failing(replay_tests.outcomes(junit))
    return result


def retest_all(
    py: str, lane: Path, files: list[str], env: dict, logs: Path
) -> tuple[dict, dict[str, dict]]:
    """Each file alone; the result, and every test's outcome (``replay_tests``)."""
    per_file: dict[str, dict] = {}
    junits = lane.parent / "junit-retest"
    shutil.rmtree(junits, ignore_errors=True)
    junits.mkdir()
    t0 = time.monotonic()
    for i, rel in enumerate(files):
        junit = f"--junitxml={junits / f'{i}.xml'}"
        cmd = [py, "-m", "pytest", "-q", "-p", "no:cacheprovider", junit, rel]
        took, proc = timed(cmd, lane, env)
        per_file[rel] = {"exit": proc.returncode, "time": round(took, 3)}
        if proc.returncode != 0:
            (logs / ("retest-" + rel.replace("/", "_") + ".log")).write_text(
                proc.stdout + proc.stderr
            )
    wall = time.monotonic() - t0
    failed = sorted(f for f, r in per_file.items() if r["exit"] != 0)
    tests = replay_tests.merged(sorted(junits.iterdir()))
    result = {
        "wall": round(wall, 3),
        "total": len(files),
        "ran": len(files),
        "failed": failed,
        "per_file": per_file,
        "failing_tests": replay_tests.failing(tests),
    }
    return result, tests


CATEGORIES = (
    "package code",
    "test code",
    "test data",
    "pytest config",
    "version metadata",
    "root file stat'ed by pytest",
    "folder listing",
    "other",
)


def category(rel: str, project: Project) -> str:
    """What kind of file a re-run's cause is (``rel``: relative to the lane; a trailing
    ``/`` marks a folder whose listing changed)."""
    if rel.endswith("/"):
        return "folder listing"
    if rel.startswith(".bench-meta/"):
        return "version metadata"
    if rel in ("pyproject.toml", "setup.cfg", "tox.ini", "pytest.ini") or rel.endswith(
        "conftest.py"
    ):
        return "pytest config"
    under_tests = rel.startswith(project.tests.rstrip("/") + "/")
    if rel.endswith((".py", ".pyi")):
        if under_tests:
            return "test code"
        if rel.startswith(project.import_root.rstrip("/") + "/") or project.import_root == ".":
            return "package code"
        return "other"
    if under_tests:
        return "test data"
    if "/" not in rel:
        return "root file stat'ed by pytest"
    return "other"


def attribute(py: str, lane: Path, diff: dict, env: dict, project: Project) -> dict:
    """Why each stored target will re-run, before the build: the categories of the changed
    inputs of its record (see ATTRIBUTE), or 'last run failed' / 'not reusable'."""
    if not (lane / ".memotest").exists():
        return {}
    spec = {k: [str(lane / p) for p in v] for k, v in diff.items()}
    spec_file, out = lane.parent / "attribute-in.json", lane.parent / "attribute-out.json"
    spec_file.write_text(json.dumps(spec))
    proc = subprocess.run(
        [py, "-c", ATTRIBUTE, str(lane), str(spec_file), str(out)],
        env=env,
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT,
    )
    if proc.returncode != 0:
        return {"error": proc.stderr[-500:]}
    data = json.loads(out.read_text())
    result = {}
    for name, rec in data.items():
        cats = sorted(
            {
                category(
                    os.path.relpath(c.rstrip("/"), lane) + ("/" if c.endswith("/") else ""), project
                )
                for c in rec["causes"]
            }
        )
        if rec["status"] != "passed":
            cats.append("last run failed")
        elif not rec["cacheable"]:
            cats.append("not reusable")
        result[name.removeprefix("pytest:")] = {
            "categories": cats,
            "causes": [os.path.relpath(c.rstrip("/"), lane) for c in rec["causes"]][:20],
        }
    return result


def memotest_build(
    venv_path: Path, lane: Path, tests: str, key: str, env: dict, logs: Path
) -> tuple[dict, dict[str, dict]]:
    """One build of the lane ``key`` (its flags in BUILDS); the result, and every test's
    outcome from its JUnit XML (``replay_tests``)."""
    report = lane.parent / f"report-{key}.json"
    junit = lane.parent / f"junit-{key}.xml"
    report.unlink(missing_ok=True)
    junit.unlink(missing_ok=True)
    cmd = [
        str(venv_path / "bin" / "memotest"),
        "build",
        *BUILDS[key],
        "--json-report",
        str(report),
        "--junit-xml",
        str(junit),
        "--pytest",
        tests,
    ]
    wall, proc = timed(cmd, lane, env)
    (logs / f"memotest-{key}.txt").write_text(proc.stdout + proc.stderr)
    result: dict = {"wall": round(wall, 3), "exit": proc.returncode}
    per_test = replay_tests.outcomes(junit)
    result.update(replay_tests.counts(per_test))
    if not report.exists():
        # memotest refused to build (exit 2: e.g. a file pytest could not collect).
        result.update(
            total=0,
            ran=0,
            cached=0,
            failed=[],
            targets={},
            build_duration=0.0,
            error=(proc.stdout + proc.stderr).strip()[-2000:],
        )
        return result, per_test
    data = json.loads(report.read_text())
    shutil.copy(report, logs / f"memotest-{key}.json")
    targets = {}
    for t in data["targets"]:
        name = t["name"].removeprefix("pytest:")
        targets[name] = {
            "status": t["status"],
            "duration": t.get("duration"),
            "reason": t.get("reason"),
        }
    summary = data["summary"]
    cached = sum(1 for t in targets.values() if t["status"] == "cached")
    result.update(
        total=summary["total"],
        ran=summary["total"] - cached,
        cached=cached,
        failed=sorted(
            n for n, t in targets.items() if t["status"] in ("failed", "timeout", "error")
        ),
        build_duration=summary.get("duration"),
        hazards=len(data.get("hazards") or []),
        targets=targets,
    )
    return result, per_test


SUMMARY = re.compile(r"(\d+) (passed|failed|skipped|deselected|errors?|xfailed|xpassed)")


def testmon(py: str, lane: Path, tests: str, env: dict, logs: Path) -> dict:
    # Like RetestAll (one process per file), a file that cannot be collected must not keep
    # the others from running: without the flag, pytest (and so testmon) stops the whole
    # session at a collection error and its time would be that of running nothing.
    cmd = [py, "-m", "pytest", "--testmon", "--continue-on-collection-errors", "-q", "-rfE"]
    cmd.append(tests)
    wall, proc = timed(cmd, lane, env)
    out = proc.stdout + proc.stderr
    (logs / "testmon.txt").write_text(out)
    return {"wall": round(wall, 3), "exit": proc.returncode, **parse_testmon(out)}


def parse_testmon(out: str) -> dict:
    """The failing files (short summary's FAILED/ERROR lines) and the counts of pytest's
    last summary line (stderr, e.g. plugin warnings, may follow it)."""
    failed = set()
    for ln in out.splitlines():
        m = re.match(r"^(FAILED|ERROR) (\S+?)(::|\s|$)", ln)
        if m:
            failed.add(m.group(2))
    counts: dict[str, int] = {}
    lines = [
        ln for ln in out.splitlines() if re.search(r" in [0-9.]+s\b", ln) and SUMMARY.search(ln)
    ]
    for n, word in SUMMARY.findall(lines[-1] if lines else ""):
        counts[word.rstrip("s") if word.startswith("error") else word] = int(n)
    executed = sum(counts.get(k, 0) for k in ("passed", "failed", "xfailed", "xpassed", "error"))
    return {"failed": sorted(failed), "tests_run": executed, "counts": counts}


# ---------------------------------------------------------------- agreement and summary


def agreement(retest: dict, build: dict) -> list[dict]:
    """Every file that fails under RetestAll must have been run, and failed, by memotest.
    Files that fail under memotest but pass under RetestAll are listed too (kind
    'extra-failure'): not a skip, but a difference worth knowing."""
    out = []
    targets = build.get("targets", {})
    for f in retest["failed"]:
        t = targets.get(f)
        if t is None:
            out.append(
                {
                    "file": f,
                    "kind": "not-run",
                    "memotest": build.get("error", "no such target")[-300:],
                }
            )
        elif t["status"] == "cached":
            out.append({"file": f, "kind": "skipped", "memotest": t.get("reason")})
        elif t["status"] not in ("failed", "timeout", "error"):
            out.append({"file": f, "kind": "passed", "memotest": t["status"]})
    for f in build.get("failed", []):
        if f not in retest["failed"]:
            out.append({"file": f, "kind": "extra-failure", "memotest": targets[f]["status"]})
    return out


def order_differences(retest: dict, session: dict) -> dict | None:
    """The files whose outcome differs between RetestAll (each file alone, the reference
    of the agreement check) and one pytest session over them all (``session``): a test
    that depends on what another file's tests did first (order dependence across files).
    None when they agree."""
    alone, together = set(retest["failed"]), set(session["failed"])
    if alone == together:
        return None
    return {"alone_only": sorted(alone - together), "session_only": sorted(together - alone)}


def ratio(a: float, b: float) -> float:
    return round(a / b, 3) if b else float("nan")


def base(revs: list[dict]) -> str:
    """The lane every ratio is to: one-process pytest, or RetestAll in a results file from
    before the pytest lanes."""
    return BASE if BASE in revs[0] else "retest"


def timed_lanes(revs: list[dict]) -> tuple[str, ...]:
    return tuple(k for k in LANES if k in revs[0])


def summarize(revs: list[dict]) -> dict:
    first, rest = revs[0], revs[1:]
    b = base(revs)
    lanes = timed_lanes(revs)

    def mean(values: list[float]) -> float | None:
        return round(statistics.fmean(values), 3) if values else None

    s: dict = {
        "revisions": len(revs),
        "test_files": [
            min(r["retest"]["total"] for r in revs),
            max(r["retest"]["total"] for r in revs),
        ],
        "base": b,
        "first": {k: ratio(first[k]["wall"], first[b]["wall"]) for k in lanes if k != b},
        "first_wall": {k: first[k]["wall"] for k in lanes},
    }
    for k in ("j1", "j2", "sel"):
        s[f"selection_{k}"] = mean(
            [r[k]["ran"] / r[k]["total"] for r in rest if k in r and r[k]["total"]]
        )
    # The share of the tests the test-level lane ran (the others replayed).
    s["selection_sel_tests"] = mean(
        [r["sel"]["tests_run"] / r["sel"]["tests"] for r in rest if r.get("sel", {}).get("tests")]
    )
    s["selection_testmon"] = mean(
        [
            min(1.0, r["testmon"]["tests_run"] / max(1, r["tests_total"]))
            for r in rest
            if "testmon" in r
        ]
    )
    # A revision where memotest refused to build (exit 2: pytest could not collect a file)
    # ran nothing; its time says nothing about selection, so the ratios leave it out (for
    # every tool, to compare like with like) and it is listed under "refused".
    built = [r for r in rest if r["j1"]["exit"] != 2 and r["j2"]["exit"] != 2]
    s["refused"] = [r["version"] for r in revs if 2 in (r["j1"]["exit"], r["j2"]["exit"])]
    for k in lanes:
        if k != b:
            s[f"ratio_{k}"] = mean([ratio(r[k]["wall"], r[b]["wall"]) for r in built])
    s["retest_wall_mean"] = mean([r["retest"]["wall"] for r in rest])
    s["base_wall_mean"] = mean([r[b]["wall"] for r in rest])
    # Files whose outcome in one pytest session differs from RetestAll's (order dependence
    # across files; RetestAll stays the reference of the agreement check).
    s["order_differences"] = [
        {"version": r["version"], "lane": k, **d}
        for r in revs
        for k, d in (r.get("order") or {}).items()
        if d
    ]
    # Why the -j1 targets re-ran after the first revision (see attribute()).
    why: dict[str, int] = {}
    without_root_stats = []
    for r in rest:
        ran = [f for f, t in r["j1"]["targets"].items() if t["status"] != "cached"]
        needed = 0
        for f in ran:
            cats = r["causes"].get(f, {}).get("categories") if f in r["causes"] else ["new"]
            cats = cats or ["unexplained"]
            for c in cats:
                why[c] = why.get(c, 0) + 1
            if set(cats) - {"root file stat'ed by pytest"}:
                needed += 1
        if r["j1"]["total"]:
            without_root_stats.append(needed / r["j1"]["total"])
    # Where memotest's time goes (-j1, revisions after the first where it built).
    built1 = [r for r in rest if r["j1"]["exit"] != 2 and r["j1"]["ran"]]
    outside, per_target, bookkeeping = [], [], []
    for r in built1:
        ran = {f: t for f, t in r["j1"]["targets"].items() if t["status"] != "cached"}
        traced = sum(t["duration"] or 0 for t in ran.values())
        plain = sum(r["retest"]["per_file"].get(f, {}).get("time", 0) for f in ran)
        outside.append(r["j1"]["wall"] - (r["j1"]["build_duration"] or 0))
        per_target.append((traced - plain) / len(ran))
        bookkeeping.append(((r["j1"]["build_duration"] or 0) - traced) / len(ran))
    s["time_j1"] = {
        "startup_and_collection": mean(outside),
        "pytest_collection_alone": mean([r["collect_wall"] for r in rest]),
        "tracing_overhead_per_target": mean(per_target),
        "bookkeeping_per_target": mean(bookkeeping),
        "retest_per_file": mean([r["retest"]["wall"] / r["retest"]["total"] for r in rest]),
        "j1_over_j2": mean([r["j1"]["wall"] / r["j2"]["wall"] for r in built1]),
    }
    s["rerun_causes_j1"] = dict(sorted(why.items(), key=lambda kv: -kv[1]))
    s["reruns_j1"] = sum(r["j1"]["ran"] for r in rest)
    s["selection_j1_without_root_stats"] = mean(without_root_stats)
    # The default lanes (whole files) must agree with RetestAll file by file and test by
    # test; the test-level lane's differences are listed apart (see replay_tests).
    s["disagreements"] = [
        {"version": r["version"], "jobs": k, **d}
        for r in revs
        for k in ("j1", "j2")
        for d in r["agreement"][k]
        if d["kind"] != "extra-failure"
    ] + [
        {"version": r["version"], "jobs": k, "file": d["test"], "kind": "test", **d}
        for r in revs
        for k in ("j1", "j2")
        for d in r.get("tests", {}).get(k, {}).get("disagreements", [])
    ]
    s["select_tests"] = {
        key: sorted(
            {
                (r["version"], t)
                for r in revs
                for t in r.get("tests", {}).get("sel", {}).get(key, [])
            }
        )
        for key in ("order_within_file", "extra_failures")
    }
    s["select_tests"]["disagreements"] = [
        {"version": r["version"], **d}
        for r in revs
        for d in r.get("tests", {}).get("sel", {}).get("disagreements", [])
    ]
    s["order_across_files"] = sorted(
        {
            (r["version"], t)
            for r in revs
            for t in r.get("tests", {}).get("j1", {}).get("order_across_files", [])
        }
    )
    s["extra_failures"] = [
        {"version": r["version"], "jobs": k, **d}
        for r in revs
        for k in ("j1", "j2")
        for d in r["agreement"][k]
        if d["kind"] == "extra-failure"
    ]
    s["testmon_differences"] = [
        {
            "version": r["version"],
            "retest_only": sorted(set(r["retest"]["failed"]) - set(r["testmon"]["failed"])),
            "testmon_only": sorted(set(r["testmon"]["failed"]) - set(r["retest"]["failed"])),
        }
        for r in revs
        if "testmon" in r and set(r["retest"]["failed"]) != set(r["testmon"]["failed"])
    ]
    return s


def fmt(x: float | None, pct: bool = False) -> str:
    if x is None:
        return "-"
    return f"{100 * x:.0f}%" if pct else f"{x:.2f}"


def print_tables(results: dict) -> None:
    log("\nPer revision (wall seconds; memotest: targets run/total):")
    log(
        f"{'project':<10} {'release':<8} {'files':>5} {'RetestAll':>9} {'pytest':>6} "
        f"{'-n 2':>5} {'mt -j1':>14} {'mt -j2':>14} {'-j2 tests':>16} {'testmon':>14} "
        f"{'fail':>4} {'disagree':>8}"
    )
    nan = {"wall": float("nan")}
    for name, p in results["projects"].items():
        for r in p["revisions"]:
            j1, j2 = r["j1"], r["j2"]
            tm = r.get("testmon") or {"wall": float("nan"), "tests_run": 0}
            sel = r.get("sel") or {"wall": float("nan"), "tests_run": 0, "tests": 0}
            dis = sum(
                1 for k in ("j1", "j2") for d in r["agreement"][k] if d["kind"] != "extra-failure"
            )
            log(
                f"{name:<10} {r['version']:<8} {r['retest']['total']:>5} "
                f"{r['retest']['wall']:>9.1f} {r.get('pytest', nan)['wall']:>6.1f} "
                f"{r.get('xdist', nan)['wall']:>5.1f} "
                f"{j1['wall']:>6.1f} {j1['ran']:>3}/{j1['total']:<3} "
                f"{j2['wall']:>6.1f} {j2['ran']:>3}/{j2['total']:<3} "
                f"{sel['wall']:>6.1f} {sel['tests_run']:>4}/{sel['tests']:<5}"
                f"{tm['wall']:>6.1f} {tm['tests_run']:>7} "
                f"{len(r['retest']['failed']):>4} {dis:>8}"
            )
    bases = {p["summary"].get("base", "retest") for p in results["projects"].values()}
    label = "one-process pytest's" if bases == {BASE} else "RetestAll's"
    log(
        f"\nPer project (ratios are wall time / {label}; '1st' = the first revision, a full "
        "run; the others = mean over the revisions after the first):"
    )
    log(
        f"{'project':<10} {'revs':>4} {'files':>7} {'selected -j1':>12} {'testmon tests':>13} "
        f"{'1st n2':>6} {'1st -j1':>7} {'1st -j2':>7} {'1st tm':>6} {'RetestAll':>9} "
        f"{'-n 2':>5} {'-j1':>5} {'-j2':>5} {'tests':>5} {'testmon':>7} {'disagree':>8}"
    )
    for name, p in results["projects"].items():
        s = p["summary"]
        first = s["first"]
        log(
            f"{name:<10} {s['revisions']:>4} {s['test_files'][0]:>3}-{s['test_files'][1]:<3} "
            f"{fmt(s['selection_j1'], True):>12} {fmt(s['selection_testmon'], True):>13} "
            f"{fmt(first.get('xdist')):>6} {fmt(first['j1']):>7} {fmt(first['j2']):>7} "
            f"{fmt(first.get('testmon')):>6} {fmt(s.get('ratio_retest')):>9} "
            f"{fmt(s.get('ratio_xdist')):>5} {fmt(s['ratio_j1']):>5} {fmt(s['ratio_j2']):>5} "
            f"{fmt(s.get('ratio_sel')):>5} "
            f"{fmt(s.get('ratio_testmon')):>7} {len(s['disagreements']):>8}"
        )
    log(
        "\nWhy memotest -j1 re-ran targets after the first revision (a re-run counts once "
        "under each kind of changed input its record had):"
    )
    for name, p in results["projects"].items():
        s = p["summary"]
        causes = ", ".join(f"{k} {v}" for k, v in s["rerun_causes_j1"].items())
        log(f"{name:<10} {s['reruns_j1']} re-runs: {causes}")
        if s["refused"]:
            log(
                f"{'':<10} memotest refused to build (exit 2) at {', '.join(s['refused'])}: "
                "left out of the time ratios"
            )
        log(
            f"{'':<10} selection if the stat'ed root files did not count: "
            f"{fmt(s['selection_j1_without_root_stats'], True)}"
        )
    log(
        "\nWhere memotest -j1's time goes (seconds, mean over the revisions after the first): "
        "start-up + pytest collection per build (the collection alone), per re-run target: "
        "traced run minus the same file's RetestAll run, and planning/recording; a RetestAll "
        "file for scale; -j1/-j2 wall-time ratio:"
    )
    for name, p in results["projects"].items():
        t = p["summary"]["time_j1"]
        log(
            f"{name:<10} start+collect {fmt(t['startup_and_collection'])} "
            f"({fmt(t['pytest_collection_alone'])}) | tracing "
            f"+{fmt(t['tracing_overhead_per_target'])}/target | bookkeeping "
            f"{fmt(t['bookkeeping_per_target'])}/target | RetestAll "
            f"{fmt(t['retest_per_file'])}/file | -j1/-j2 {fmt(t['j1_over_j2'])}"
        )
    for name, p in results["projects"].items():
        for d in p["summary"]["disagreements"]:
            log(
                f"DISAGREEMENT {name} {d['version']} -j{d['jobs'][1:]}: {d['file']} failed "
                f"under RetestAll, memotest: {d['kind']} ({d['memotest']})"
            )
        for d in p["summary"]["extra_failures"]:
            log(
                f"note: {name} {d['version']} -j{d['jobs'][1:]}: {d['file']} failed under "
                "memotest but passed under RetestAll"
            )
        for d in p["summary"].get("order_differences", []):
            log(
                f"note: {name} {d['version']}: RetestAll vs pytest {d['lane']} failing files "
                f"differ (order dependence across files): RetestAll only {d['alone_only']}, "
                f"{d['lane']} only {d['session_only']}"
            )
        sel = p["summary"].get("select_tests")
        if sel:
            log(
                f"test level ({name}): -j2 --select tests ran "
                f"{fmt(p['summary'].get('selection_sel_tests'), True)} of the tests after the "
                f"first revision; disagreements {len(sel['disagreements'])}, tests failing only "
                f"after their file's other tests (order within a file) "
                f"{len(sel['order_within_file'])}, extra failures {len(sel['extra_failures'])}"
            )
            for d in sel["disagreements"]:
                log(f"  --select tests {d['version']}: {d['test']} failed alone, {d['memotest']}")
            for version, test in sel["order_within_file"]:
                log(f"  order within a file {version}: {test}")
            for version, test in sel["extra_failures"]:
                log(f"  extra failure under --select tests {version}: {test}")
        for version, test in p["summary"].get("order_across_files", []):
            log(
                f"note: {name} {version}: {test} fails in one pytest session, passes with its "
                "file alone (order dependence across files)"
            )
        for d in p["summary"]["testmon_differences"]:
            log(
                f"note: {name} {d['version']}: testmon vs RetestAll failing files differ: "
                f"RetestAll only {d['retest_only']}, testmon only {d['testmon_only']}"
            )


def plot(results_file: Path, out: Path) -> str | None:
    path = BENCH / "venv-plot"
    py = path / "bin" / "python"
    try:
        if not (path / "bench-ok").exists():
            log("making .bench/venv-plot (matplotlib)")
            shutil.rmtree(path, ignore_errors=True)
            run([sys.executable, "-m", "venv", str(path)])
            run([str(py), "-m", "pip", "install", "-q", *PLOT_REQUIREMENTS])
            (path / "bench-ok").touch()
        out.parent.mkdir(parents=True, exist_ok=True)
        run([str(py), "-c", PLOT_SCRIPT, str(results_file), str(out)])
    except subprocess.CalledProcessError as exc:
        return f"plot failed: {exc.stderr or exc}"
    return None


# ---------------------------------------------------------------- main


def replay(project: Project, versions: list[str]) -> dict:
    log(f"== {project.name}: {' '.join(versions)}")
    started = time.time()
    load_start = os.getloadavg()
    missing = [(p, pkg) for p, pkg in project.build_programs if shutil.which(p) is None]
    if missing:
        sys.exit(
            f"{project.name}: its test requirements build from source and need "
            + ", ".join(p for p, _ in missing)
            + ", not found; install them first (Debian/Ubuntu: apt-get install "
            + " ".join(sorted({pkg for _, pkg in missing}))
            + ")"
        )
    venv_path = venv(project)
    for program, package in project.programs:
        if shutil.which(program) is None:
            log(
                f"  note: {program} is not installed: the tests that run it will fail "
                f"(Debian/Ubuntu: apt-get install {package})"
            )
    py = str(venv_path / "bin" / "python")
    work = WORK / project.name
    shutil.rmtree(work, ignore_errors=True)
    lanes = {k: Lane(work / k) for k in LANES if k in SELECTED}
    for lane in lanes.values():
        lane.root.mkdir(parents=True)
    revs = []
    meta: dict[str, bytes] | None = None
    for i, version in enumerate(versions):
        src_root = extracted(project.name, version)
        src = release_files(src_root)
        if project.metadata:
            release = installed_metadata(src_root)
            if meta is None:
                meta = release
            # The first release's version, each release's entry points (see the module doc).
            meta = {"METADATA": meta["METADATA"]}
            if "entry_points.txt" in release:
                meta["entry_points.txt"] = release["entry_points.txt"]
        dist = re.sub(r"[-.]+", "_", project.name).lower()
        diff = {}
        for lane in lanes.values():
            diff = lane.checkout(src, meta, dist)
        logs = LOGS / project.name / version
        shutil.rmtree(logs, ignore_errors=True)
        logs.mkdir(parents=True)
        envs = {k: environment(project, lane.root, venv_path) for k, lane in lanes.items()}
        col = collect(py, lanes["retest"].root, project.tests, envs["retest"])
        rev: dict = {
            "version": version,
            "index": i,
            "release_diff": {k: len(v) for k, v in diff.items()},
            "release_changed": diff["changed"] + diff["added"] + diff["removed"],
            "collect_wall": round(col["wall"], 3),
            "collect_errors": col["errors"],
        }
        rev["retest"], alone = retest_all(
            py, lanes["retest"].root, col["files"], envs["retest"], logs
        )
        for key, workers in (("pytest", 0), ("xdist", 2)):
            if key not in lanes:
                continue
            rev[key] = pytest_lane(py, lanes[key].root, project.tests, envs[key], logs, workers)
        rev["causes"] = attribute(py, lanes["j1"].root, diff, envs["j1"], project)
        rev["tests"] = {}
        for key in BUILDS:
            if key not in lanes:
                continue
            rev[key], per_test = memotest_build(
                venv_path, lanes[key].root, project.tests, key, envs[key], logs
            )
            rev["tests"][key] = replay_tests.compare(
                alone, rev["pytest"]["failing_tests"], per_test
            )
        if "testmon" in lanes:
            rev["testmon"] = testmon(
                py, lanes["testmon"].root, project.tests, envs["testmon"], logs
            )
        rev["tests_total"] = col["tests"]
        rev["agreement"] = {k: agreement(rev["retest"], rev[k]) for k in BUILDS if k in rev}
        rev["order"] = {
            k: order_differences(rev["retest"], rev[k]) for k in ("pytest", "xdist") if k in rev
        }
        rev["loadavg"] = os.getloadavg()
        dis = sum(
            1 for k in ("j1", "j2") for d in rev["agreement"][k] if d["kind"] != "extra-failure"
        )
        tm = rev.get("testmon", {"wall": float("nan"), "tests_run": "-"})
        log(
            f"  {version:<8} changed {len(rev['release_changed']):>3} files | RetestAll "
            f"{rev['retest']['wall']:5.1f}s ({len(rev['retest']['failed'])} failing) | pytest "
            f"{rev['pytest']['wall']:5.1f}s | -n 2 {rev.get('xdist', NAN)['wall']:5.1f}s | -j1 "
            f"{rev['j1']['wall']:5.1f}s {rev['j1']['ran']}/{rev['j1']['total']} | -j2 "
            f"{rev['j2']['wall']:5.1f}s {rev['j2']['ran']}/{rev['j2']['total']} | testmon "
            f"{tm['wall']:5.1f}s {tm['tests_run']} tests | "
            f"disagreements {dis} | load {rev['loadavg'][0]:.1f}"
        )
        revs.append(rev)
    return {
        "why": project.why,
        "releases": versions,
        "import_root": project.import_root,
        "tests": project.tests,
        "requirements": [project.pytest, *COMMON_REQUIREMENTS, *project.requirements],
        "freeze": freeze(venv_path),
        "started": time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(started)),
        "duration": round(time.time() - started, 1),
        "loadavg": {"start": load_start, "end": os.getloadavg()},
        "revisions": revs,
        "summary": summarize(revs),
    }


def resummarize(out: Path, png: Path) -> int:
    results = json.loads(out.read_text())
    for name, p in results["projects"].items():
        for r in p["revisions"]:
            text = LOGS / name / r["version"] / "testmon.txt"
            if text.exists():
                r["testmon"].update(parse_testmon(text.read_text()))
        p["summary"] = summarize(p["revisions"])
    out.write_text(json.dumps(results, indent=1) + "\n")
    print_tables(results)
    problem = plot(out, png)
    log(problem or f"wrote {png}")
    return 1 if any(p["summary"]["disagreements"] for p in results["projects"].values()) else 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--projects",
        nargs="+",
        default=None,
        metavar="NAME",
        help=f"among {', '.join(PROJECTS)} (space- or comma-separated; default: "
        f"{' '.join(DEFAULT_PROJECTS)})",
    )
    ap.add_argument(
        "--revisions",
        type=int,
        default=None,
        help="successive releases per project, the latest N (default 10)",
    )
    ap.add_argument(
        "--quick",
        action="store_true",
        help="smoke run: 2 projects x 3 releases, results kept apart",
    )
    ap.add_argument("--out", type=Path, default=None, help="the JSON results file")
    ap.add_argument(
        "--merge",
        action="store_true",
        help="keep the other projects already in the results file (replace only those run)",
    )
    ap.add_argument(
        "--resummarize",
        action="store_true",
        help="run nothing: re-read the results file (and the testmon logs in .bench/logs), "
        "recompute the summaries, print the tables and redraw the plot",
    )
    ap.add_argument("--plot", type=Path, default=None, help="the PNG plot")
    ap.add_argument(
        "--lanes",
        default=",".join(LANES),
        help=f"the lanes to run, comma-separated, among {','.join(LANES)} (default: all; "
        f"{','.join(REQUIRED_LANES)} always run): a quicker run for the files re-run and "
        "the agreement check",
    )
    args = ap.parse_args()
    names = [n for arg in args.projects or [] for n in arg.split(",") if n]
    names = names or list(QUICK_PROJECTS if args.quick else DEFAULT_PROJECTS)
    unknown = [n for n in names if n not in PROJECTS]
    if unknown:
        ap.error(f"unknown project(s) {', '.join(unknown)}; known: {', '.join(PROJECTS)}")
    n = args.revisions or (3 if args.quick else 10)
    out = args.out or RESULTS / ("replay-quick.json" if args.quick else "replay.json")
    png = args.plot or (BENCH / "replay-quick.png" if args.quick else PLOT)
    BENCH.mkdir(exist_ok=True)
    global LOGS
    LOGS = BENCH / "logs" / out.stem
    lanes = {k for k in args.lanes.split(",") if k}
    if lanes - set(LANES):
        ap.error(
            f"unknown lane(s) {', '.join(sorted(lanes - set(LANES)))}; known: {', '.join(LANES)}"
        )
    SELECTED.clear()
    SELECTED.update(lanes | set(REQUIRED_LANES))
    if args.resummarize:
        return resummarize(out, png)
    started = time.time()
    results: dict = {
        "command": " ".join(["python", "benchmarks/replay.py", *sys.argv[1:]]),
        "machine": {
            "cpus": os.cpu_count(),
            "loadavg_start": os.getloadavg(),
            "python": sys.version.split()[0],
            "platform": platform.platform(),
        },
        "started": time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(started)),
        "projects": {},
    }
    for name in names:
        project = PROJECTS[name]
        if n > len(project.releases):
            sys.exit(f"{name}: only {len(project.releases)} releases are listed")
        results["projects"][name] = replay(project, list(project.releases[-n:]))
    results["machine"]["loadavg_end"] = os.getloadavg()
    if args.merge and out.exists():
        previous = json.loads(out.read_text())
        merged = dict(previous["projects"])
        merged.update(results["projects"])
        results["projects"] = merged
        results["runs"] = [*previous.get("runs", [previous.get("command")]), results["command"]]
    results["duration"] = round(time.time() - started, 1)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=1) + "\n")
    print_tables(results)
    log(
        f"\nwrote {out.relative_to(REPO) if out.is_relative_to(REPO) else out} "
        f"in {results['duration']:.0f}s"
    )
    problem = plot(out, png)
    log(problem or f"wrote {png.relative_to(REPO) if png.is_relative_to(REPO) else png}")
    return 1 if any(p["summary"]["disagreements"] for p in results["projects"].values()) else 0


if __name__ == "__main__":
    sys.exit(main())
