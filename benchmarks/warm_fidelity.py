"""Does a run forked from a warm worker print what a fresh process prints?

memotest forks each ``--pytest`` target from a warm worker (``memotest/tracer/warm/``)
unless ``--no-warm`` is given. For each project of ``benchmarks/replay.py`` (its venv and
downloads, ``.bench/``), the last listed release is laid into ``$TMPDIR/memotest-fidelity/PROJECT``
and every target is run four times, with ``memotest build --force``: fresh (``--no-warm``),
fresh again (the control: what differs between two fresh runs is the suite's own
randomness, such as a set's order under a random hash seed), warm (the first warm build:
its workers import pytest only, and the runs report what they imported) and preloaded
(the next: its workers also import what the first build's runs reported,
``memotest/tracer/warm/preload.py``). Each target's log (``memotest show --log``) is compared,
with durations, hexadecimal addresses and the private temporary folders' names
normalized. Prints per project how many targets printed the same in both fresh runs, how
many printed the same warm and preloaded as fresh, and every target whose warm or
preloaded log differs from its fresh one although the two fresh logs agree (with the
first differing lines). Exit status 1 when there is such a target or a status differs.

Run: ``python benchmarks/warm_fidelity.py [--projects NAME ...]`` (about a minute a project);
``--checkout NAME=DIR --venv VENV`` for a local checkout (as ``full_run.py``). The warm and
preloaded builds fork each file from a configured pytest worker (memotest's default), the
fresh ones run ``python -m pytest FILE``.
"""

from __future__ import annotations

import argparse
import difflib
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import replay

NORMALIZE = (
    (re.compile(r"\d+(\.\d+)?s\b"), "Ns"),  # durations
    (re.compile(r"0x[0-9a-fA-F]+"), "0xN"),  # object addresses
    (re.compile(r"memotest-[A-Za-z0-9_]+"), "memotest-N"),  # the private TMPDIR
)


def normalize(text: str) -> str:
    for pattern, repl in NORMALIZE:
        text = pattern.sub(repl, text)
    return text


class Lane:
    def __init__(
        self, project: replay.Project, checkout: Path | None = None, venv: Path | None = None
    ) -> None:
        self.project = project
        self.checkout = checkout
        self.venv = venv or replay.venv(project)
        self.memotest = str(self.venv / "bin" / "memotest")
        # Outside this repository, like the replay's lanes: pytest would otherwise take
        # memotest's own pyproject.toml as the configuration of a project without one.
        self.root = replay.WORK.parent / "memotest-fidelity" / project.name
        self.env = replay.environment(project, self.root, self.venv)
        self.env["MEMOTEST_PYTEST_CONFIGURED"] = "1"  # the warm builds: configured workers

    def setup(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)
        if self.checkout is not None:
            shutil.copytree(self.checkout, self.root, symlinks=True)
            return
        self.root.mkdir(parents=True)
        version = self.project.releases[-1]
        src_root = replay.extracted(self.project.name, version)
        meta = replay.installed_metadata(src_root) if self.project.metadata else None
        dist = re.sub(r"[-.]+", "_", self.project.name).lower()
        replay.Lane(self.root).checkout(replay.release_files(src_root), meta, dist)

    def run(self, *flags: str) -> dict[str, tuple[str, str]]:
        """Builds every target (``--force``); returns {target: (status, normalized log)}."""
        report = self.root.parent / f"{self.project.name}-report.json"
        build = [self.memotest, "build", "-j2", "--force", *flags, "--json-report", str(report)]
        subprocess.run(
            [*build, "--pytest", self.project.tests],
            cwd=self.root,
            env=self.env,
            capture_output=True,
            timeout=1800,
        )
        targets = json.loads(report.read_text())["targets"]
        out = {}
        for t in targets:
            proc = subprocess.run(
                [self.memotest, "show", "--log", t["name"]],
                cwd=self.root,
                env=self.env,
                capture_output=True,
                text=True,
                errors="replace",
                timeout=120,
            )
            log = proc.stdout.split("\n", 1)[1] if "\n" in proc.stdout else proc.stdout
            out[t["name"]] = (t["status"], normalize(log))
        return out


def first_diff(a: str, b: str, lines: int = 4) -> str:
    diff = difflib.unified_diff(a.splitlines(), b.splitlines(), "fresh", "warm", n=0, lineterm="")
    return "\n".join(list(diff)[2 : 2 + lines])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--projects", nargs="*", default=sorted(replay.PROJECTS))
    ap.add_argument("--checkout", action="append", default=[], metavar="NAME=DIR")
    ap.add_argument("--venv", type=Path, default=None, help="the venv of --checkout projects")
    args = ap.parse_args()
    bad = 0
    lanes = []
    if not args.checkout:
        lanes = [Lane(replay.PROJECTS[name]) for name in args.projects]
    else:
        for spec in args.checkout:
            name, _, folder = spec.partition("=")
            source = Path(folder).resolve()
            root = "src" if (source / "src").is_dir() else "."
            project = replay.Project(name, root, "tests", ("checkout",), (), "", metadata=False)
            lanes.append(Lane(project, source, args.venv))
    for lane in lanes:
        name = lane.project.name
        lane.setup()
        fresh = lane.run("--no-warm")
        again = lane.run("--no-warm")
        runs = {"warm": lane.run(), "preloaded": lane.run()}
        same_fresh = sum(fresh[t][1] == again.get(t, ("", ""))[1] for t in fresh)
        same = {
            kind: sum(fresh[t][1] == logs.get(t, ("", ""))[1] for t in fresh)
            for kind, logs in runs.items()
        }
        print(
            f"{name} {lane.project.releases[-1]}: {len(fresh)} targets; logs identical: "
            f"fresh/fresh {same_fresh}, fresh/warm {same['warm']}, "
            f"fresh/preloaded {same['preloaded']}"
        )
        for kind, logs in runs.items():
            for t in sorted(fresh):
                status, log = fresh[t]
                w_status, w_log = logs.get(t, ("missing", ""))
                if w_status != status:
                    bad += 1
                    print(f"  STATUS {t}: fresh {status}, {kind} {w_status}")
                elif w_log != log and again.get(t, ("", ""))[1] == log:
                    bad += 1
                    print(f"  DIFFERS {kind} {t} (the fresh runs agree):\n{first_diff(log, w_log)}")
                elif w_log != log:
                    print(f"  differs, as between the fresh runs: {kind} {t}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
