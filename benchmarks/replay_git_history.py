"""A project's git history for ``benchmarks/replay_git.py``: its commits, what each changed,
the working folders ("lanes") that receive them as a developer's checkout does, and the
version its installed metadata would say.

Everything here runs ``git`` on a mirror (a git directory without a work tree, as the
``fetch`` tool brings it: ``/work/.mirror/OWNER+NAME/repo``) or on a lane (a real clone of
it, ``git clone --shared --no-checkout``, then ``git checkout -q COMMIT`` at each step: the
files the commit leaves alone keep their modification times, and ``.git`` is there as in
real life).
"""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

#: Where the ``fetch`` tool puts the mirrors (``MEMOTEST_BENCH_MIRRORS`` to choose another).
MIRRORS = Path(os.environ.get("MEMOTEST_BENCH_MIRRORS") or "/work/.mirror")
#: The GitHub repository of each project replay.py knows (its mirror: OWNER+NAME/repo).
REPOSITORIES = {
    "structlog": "hynek/structlog",
    "attrs": "python-attrs/attrs",
    "click": "pallets/click",
}


def git(*args: str, cwd: Path | None = None) -> str:
    return subprocess.run(
        ["git", *args], cwd=cwd, check=True, capture_output=True, text=True
    ).stdout


def mirror_of(project: str) -> Path:
    """The mirror of ``project``'s repository (see REPOSITORIES)."""
    owner, _, name = REPOSITORIES[project].partition("/")
    return MIRRORS / f"{owner}+{name}" / "repo"


@dataclass(frozen=True)
class Commit:
    sha: str
    subject: str

    @property
    def short(self) -> str:
        return self.sha[:8]


def commits(mirror: Path, n: int, ref: str = "HEAD") -> list[Commit]:
    """The last ``n`` first-parent commits of ``ref`` (the default branch), oldest first."""
    out = git("--git-dir", str(mirror), "log", "--first-parent", f"-n{n}", "--format=%H%x09%s", ref)
    found = [Commit(*line.split("\t", 1)) for line in out.splitlines() if line]
    return found[::-1]


def diff(mirror: Path, before: str | None, after: str) -> dict[str, list[str]]:
    """The files ``after`` changed, added and removed since ``before`` (renames as a removal
    and an addition, as the working folder sees them); every file as added without
    ``before``."""
    if before is None:
        files = git("--git-dir", str(mirror), "ls-tree", "-r", "--name-only", after)
        return {"changed": [], "added": sorted(files.splitlines()), "removed": []}
    out = git("--git-dir", str(mirror), "diff", "--name-status", "--no-renames", before, after)
    return parse_name_status(out)


def parse_name_status(out: str) -> dict[str, list[str]]:
    """``git diff --name-status --no-renames``'s lines, by kind."""
    kinds = {"A": "added", "D": "removed"}
    result: dict[str, list[str]] = {"changed": [], "added": [], "removed": []}
    for line in out.splitlines():
        status, _, path = line.partition("\t")
        if path:
            result[kinds.get(status[:1], "changed")].append(path)
    return {k: sorted(v) for k, v in result.items()}


def dev_version(described: str) -> str:
    """The version hatch-vcs (setuptools-scm's default ``guess-next-dev``, without the
    local part, as structlog and attrs configure it) gives a commit, from ``git describe
    --tags --long``'s ``TAG-N-gHASH``: the tag itself at N = 0, else the tag's last number
    plus one and ``.devN`` (``26.1.0-51-gc1c1e0e2`` -> ``26.1.1.dev51``)."""
    m = re.fullmatch(r"v?(.+)-(\d+)-g[0-9a-f]+", described.strip())
    if not m:
        raise ValueError(f"not git describe --long output: {described!r}")
    tag, distance = m.group(1), int(m.group(2))
    if distance == 0:
        return tag
    head, last = re.fullmatch(r"(.*?)(\d+)", tag).groups()  # type: ignore[union-attr]
    return f"{head}{int(last) + 1}.dev{distance}"


def metadata_text(dist: str, version: str, pyproject: str) -> str:
    """The ``METADATA`` a PEP 621 backend (hatchling) writes from ``pyproject``'s
    ``[project]`` table: name, version, summary, authors' e-mails, project URLs (structlog's
    ``__uri__`` and ``__email__`` read the first URL and the e-mail)."""
    try:
        import tomllib
    except ImportError:  # Python 3.10: the name and the version only
        table: dict = {}
    else:
        table = tomllib.loads(pyproject).get("project", {})
    lines = ["Metadata-Version: 2.1", f"Name: {table.get('name', dist)}", f"Version: {version}"]
    if "description" in table:
        lines.append(f"Summary: {table['description']}")
    emails = [f"{a['name']} <{a['email']}>" for a in table.get("authors", []) if "email" in a]
    if emails:
        lines.append(f"Author-email: {', '.join(emails)}")
    if "requires-python" in table:
        lines.append(f"Requires-Python: {table['requires-python']}")
    lines += [f"Project-URL: {label}, {url}" for label, url in table.get("urls", {}).items()]
    return "\n".join(lines) + "\n"


def installed_metadata(folder: Path, dist: str, version: str, pyproject: str) -> Path:
    """What ``pip install -e .`` at the first commit leaves for ``importlib.metadata``: a
    ``.dist-info`` with its ``METADATA`` (``metadata_text``), in ``folder`` (put on
    ``PYTHONPATH``, outside the lanes, as site-packages is; never rewritten afterwards: a
    developer does not reinstall at every commit). Returns ``folder``."""
    info = folder / f"{dist}-{version}.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text(metadata_text(dist, version, pyproject), encoding="utf-8")
    return folder


def clone(mirror: Path, lane: Path) -> None:
    """A lane: a clone sharing the mirror's objects, nothing checked out yet."""
    git("clone", "-q", "--shared", "--no-checkout", str(mirror), str(lane))


def checkout(lane: Path, sha: str) -> None:
    git("checkout", "-q", "--detach", sha, cwd=lane)


def test_file_of(classname: str, lane: Path) -> str:
    """The test file of a JUnit test case's ``classname`` (``tests.test_x.TestY`` ->
    ``tests/test_x.py``: the longest dotted prefix that is a file of the lane)."""
    parts = classname.split(".")
    for k in range(len(parts), 0, -1):
        rel = "/".join(parts[:k]) + ".py"
        if (lane / rel).is_file():
            return rel
    return classname
