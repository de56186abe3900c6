"""Soundness audit, the kinds of issue 16: small extra targets, each a real command that
observes one of the things a red-team saw memotest replay stale, with a change that must
re-run it and, where one makes sense, a neighbouring change that must keep it cached.

They live in ``redteam/`` beside the audited suite (``benchmarks/soundness.py`` imports
this module and runs them after the suite's kinds, or alone with ``--skip-suite``), in a
few small projects of their own, so that a settings change in one re-checks no other:
``main/`` (most targets), ``declared/`` (``settings.services``), ``shape/``
(``settings.ignore``), ``writer/`` (a writer and a reader), ``ns/`` (NSS files, built in a
user namespace) and ``py/`` (a ``--pytest`` project, for code inputs). The servers and
receivers the targets talk to are started by the audit, outside every target.

Kinds (``+``: must re-run, ``=``: must stay cached):

- ``service`` +: a client of a loopback TCP server and of a Unix-socket server the audit
  runs; the change is the server's data. Such a result is never reusable: every build
  runs it, with memotest's reason;
- ``service-declared`` =: the same clients with both endpoints in ``settings.services``,
  rebuilt with the data unchanged;
- ``network-no-connect`` +: ``sendto`` on an unconnected UDP socket, ``sendmsg`` to a
  loopback receiver, ``sendto`` to a Unix datagram receiver from a socket it can answer
  (bound to a name): never replayed;
- ``network-sink`` +: ``sendto`` to the Unix datagram receiver from an unnamed socket,
  which nothing can answer (``inputs/sink.py``): reused while the receiver is there; the
  receiver closed and its socket file removed;
- ``settings-shape`` +: a target that reads a file hidden by an ``ignore`` pattern; the
  pattern removed, or changed to another;
- ``settings-shape-other`` =: an ``ignore`` pattern added that matches nothing it read;
- ``metadata`` +: ``chmod -x`` of a script the target runs; an entry of a listed folder
  turning from file into folder (``scandir().is_file()``, ``find -type f``); a folder
  input replaced by a
  symlink to a folder with the same entries; a hard link made to a file whose link count
  the target printed;
- ``metadata-mtime`` +: a target that prints whether ``gen.txt`` is newer than
  ``src.txt``; ``src.txt`` touched to be the newer (``docs/limits.md``: out of reach on
  ``main`` until modification-time orders are held);
- ``metadata-other`` =: the script of the first ``metadata`` case touched (same content,
  same mode);
- ``umask`` +: targets that print the umask and the mode of a file they create, built
  with umask 077;
- ``rlimit`` +: a target that prints ``RLIMIT_NOFILE``, built with ``ulimit -n 512``;
- ``append-read`` +: a target (Python; ``sh`` with ``>>``, ``cat`` and ``truncate``) that
  appends a line to a file, reads it whole and truncates it back; the file's earlier
  content edited;
- ``glibc-files`` +: ``time.localtime`` with ``TZ=:FILE``, and with ``TZ=NAME`` and
  ``TZDIR``, the zone file replaced by another zone's; ``socket.gethostbyname``,
  ``socket.getaddrinfo`` and ``pwd.getpwnam`` with ``/etc/hosts`` and ``/etc/passwd``
  bind-mounted from files of the scratch project in a user namespace (``unshare -rm``:
  the machine's ``/etc`` is never touched; every build of those targets runs in such a
  namespace; skipped where unprivileged user namespaces are not allowed), the entry they
  look up edited;
- ``proc-dev`` +: reads through ``/proc/self/cwd/FILE``, ``/proc/self/root/ABS``,
  ``/dev/fd/3``, ``/proc/self/fd/N`` and of a file in ``/dev/shm`` (made by the audit,
  removed after); the file named edited;
- ``new-writer`` +: cached readers of ``data.txt`` and of whether ``flag.txt`` exists,
  and a writer edited to write the one or create the other: in that build the reader
  must re-run;
- ``new-writer-same`` =: the writer edited to write ``data.txt`` as it is;
- ``code-lineno`` +: ``--pytest`` targets whose module records its own line number at
  import (``sys._getframe().f_lineno``, logging's ``%(lineno)d``,
  ``inspect.currentframe().f_lineno``, a warning's ``lineno``); a comment line added
  above it;
- ``code-lineno-other`` =: a comment appended at the end of the module;
- ``declared-glob`` +: targets declaring ``inputs = ["data/glob/*.txt"]``, the folder
  ``data/tree`` and ``data/tree/**/*.txt``: a matching file added, a match edited, a file
  added deep in the folder, a file in it edited, a deep match added;
- ``declared-glob-other`` =: a file the glob does not match added beside the matches, a
  file added beside the declared folder.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import socketserver
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

KINDS = (
    "service",
    "service-declared",
    "network-no-connect",
    "network-sink",
    "settings-shape",
    "settings-shape-other",
    "metadata",
    "metadata-mtime",
    "metadata-other",
    "umask",
    "rlimit",
    "append-read",
    "glibc-files",
    "proc-dev",
    "new-writer",
    "new-writer-same",
    "code-lineno",
    "code-lineno-other",
    "declared-glob",
    "declared-glob-other",
)
EXPECT_CACHED = {
    "service-declared",
    "settings-shape-other",
    "metadata-other",
    "new-writer-same",
    "code-lineno-other",
    "declared-glob-other",
}
ZONEINFO = Path("/usr/share/zoneinfo")
UMASK = ["sh", "-c", 'umask 077 && exec "$@"', "sh"]

# {path: [input kinds]} of every record of the store in argv[2], into argv[1].
KINDS_OF = r"""
import json, sys
from memotest.store import Store
st = Store.open(sys.argv[2], lock=False)
out = {}
try:
    for name, rec in st.records().items():
        for fp in rec.inputs:
            out.setdefault(fp.path, []).append(fp.kind.value)
finally:
    st.close()
json.dump(out, open(sys.argv[1], "w"))
"""

Change = Callable[[], None]


class _Value(socketserver.StreamRequestHandler):
    def handle(self) -> None:
        self.wfile.write(self.server.value.encode())  # type: ignore[attr-defined]


class Servers:
    """The endpoints outside every target: a TCP and a Unix stream server that answer each
    connection with ``value``, and a UDP and a Unix datagram receiver that drop what they
    get. Their sockets are in a short temporary folder (a Unix path has 108 bytes)."""

    def __init__(self) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix="memotest-sound-"))
        self.unix_path = str(self.folder / "svc.sock")
        self.dgram_path = str(self.folder / "dgram.sock")
        self.tcp = socketserver.ThreadingTCPServer(("127.0.0.1", 0), _Value)
        self.unix = socketserver.ThreadingUnixStreamServer(self.unix_path, _Value)
        self.set("1")
        for srv in (self.tcp, self.unix):
            threading.Thread(target=srv.serve_forever, daemon=True).start()
        self.udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.udp.bind(("127.0.0.1", 0))
        self.udgram = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.udgram.bind(self.dgram_path)
        for s in (self.udp, self.udgram):
            threading.Thread(target=_drain, args=(s,), daemon=True).start()
        self.port = self.tcp.server_address[1]
        self.udp_port = self.udp.getsockname()[1]

    def set(self, value: str) -> None:
        self.tcp.value = self.unix.value = value  # type: ignore[attr-defined]

    def drop_dgram(self) -> None:
        """The Unix datagram receiver goes: closed, its socket file removed."""
        self.udgram.close()
        os.unlink(self.dgram_path)

    def restore_dgram(self) -> None:
        self.udgram = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.udgram.bind(self.dgram_path)
        threading.Thread(target=_drain, args=(self.udgram,), daemon=True).start()

    def close(self) -> None:
        for srv in (self.tcp, self.unix):
            srv.shutdown()
            srv.server_close()
        self.udp.close()
        self.udgram.close()
        shutil.rmtree(self.folder, ignore_errors=True)


def _drain(s: socket.socket) -> None:
    try:
        while s.recv(100):
            pass
    except OSError:
        pass


class Proj:
    """One small project of ``redteam/``: a ``memotest.toml`` (or a ``--pytest`` folder),
    built with ``wrap`` before ``memotest`` (a namespace) when given."""

    def __init__(self, root: Path, *, pytest: str | None = None, wrap: list[str] | None = None):
        self.root = root
        self.pytest = pytest
        self.wrap = wrap or []


class RedTeam:
    def __init__(
        self, base: Path, py: str, memotest: str, env: dict, jobs: int, log: Callable
    ) -> None:
        self.base = base / "redteam"
        self.py = py
        self.memotest = memotest
        self.env = dict(env, PATH=f"{Path(py).parent}{os.pathsep}{env.get('PATH', '')}")
        self.jobs = jobs
        self.log = log
        self.builds = 0
        self.results: list[dict] = []
        self.not_auditable: dict[str, str] = {}

    # -- building --------------------------------------------------------------------------

    def build(
        self, proj: Proj, targets: list[str], *, wrap: list[str] | None = None, force=False
    ) -> dict:
        """Builds ``targets`` of ``proj`` (all when empty): {target: (status, reason)}."""
        report = self.base / "report.json"
        report.unlink(missing_ok=True)
        cmd = [self.memotest, "build", f"-j{self.jobs}", "--json-report", str(report)]
        cmd += ["--force"] if force else []
        if proj.pytest:
            cmd += [*targets, "--pytest", proj.pytest]
        else:
            cmd += ["-f", str(proj.root / "memotest.toml"), *targets]
        cmd = [*proj.wrap, *(wrap or []), *cmd]
        proc = subprocess.run(
            cmd, cwd=proj.root, env=self.env, capture_output=True, text=True, timeout=600
        )
        self.builds += 1
        if not report.exists():
            out = (proc.stdout + proc.stderr).strip()[-300:]
            self.log(f"  memotest refused to build {proj.root.name}: {out}")
            return {t: ("refused", out) for t in targets}
        data = json.loads(report.read_text())
        return {t["name"]: (t["status"], t.get("reason") or "") for t in data["targets"]}

    def case(
        self,
        kind: str,
        proj: Proj,
        target: str,
        change: Change,
        undo: Change,
        detail: str,
        *,
        build: list[str] | None = None,
        wrap: list[str] | None = None,
        settle_force: bool = False,
    ) -> None:
        """Makes ``change``, builds ``build`` (the target alone by default) and notes what
        became of ``target``; undoes, and builds again to settle (``settle_force``: runs
        it, for a record that the change left reusable but not as the next case needs)."""
        if target in self.not_auditable:
            return
        targets = [target] if build is None else build
        change()
        status, reason = self.build(proj, targets, wrap=wrap).get(target, ("missing", ""))
        undo()
        settled = self.build(proj, targets, force=settle_force)
        settle, _ = settled.get(target, ("missing", ""))
        reran = status not in ("cached", "refused", "missing")
        self.results.append(
            {
                "kind": kind,
                "target": f"redteam/{proj.root.name}:{target}",
                "change": detail,
                "status": status,
                "reason": reason,
                "ok": (status == "cached") if kind in EXPECT_CACHED else reran,
                "settled": settle,
            }
        )

    def baseline(self, proj: Proj, never: set[str] = frozenset(), times: int = 2) -> None:
        """Builds ``proj`` ``times`` times and once more: what is not cached then (but the
        ``never`` targets, whose result must never be reused) cannot be audited."""
        for _ in range(times):
            self.build(proj, [])
        for t, (status, reason) in self.build(proj, []).items():
            if status != "cached" and t not in never:
                self.not_auditable[t] = reason or status
                self.log(f"  not auditable (its result is never reused): {t}: {reason}")
            elif status == "cached" and t in never:
                self.results.append(
                    {
                        "kind": "baseline",
                        "target": f"redteam/{proj.root.name}:{t}",
                        "change": "none",
                        "status": status,
                        "reason": "reused, though it must never be",
                        "ok": False,
                    }
                )

    def kinds_of(self, proj: Proj) -> dict[str, list[str]]:
        out = self.base / "kinds.json"
        subprocess.run(
            [self.py, "-c", KINDS_OF, str(out), str(proj.root)],
            env=self.env,
            check=True,
            capture_output=True,
        )
        return json.loads(out.read_text())


# -- the changes -----------------------------------------------------------------------------


def nothing() -> None:
    pass


def write(path: Path, new: bytes | str):
    """Replaces ``path``'s content by ``new``; the undo puts the old one back."""
    original = path.read_bytes()
    data = new.encode() if isinstance(new, str) else new

    def change() -> None:
        path.write_bytes(data)

    def undo() -> None:
        path.write_bytes(original)

    return change, undo


def create(path: Path, text: str = "probe\n"):
    def change() -> None:
        path.write_text(text)

    def undo() -> None:
        path.unlink()

    return change, undo


def files(root: Path, tree: dict[str, str]) -> None:
    for rel, text in tree.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)


def toml(name: str, argv: list[str] | str, **extra: str) -> list[str]:
    lines = [f"[targets.{name}]", f"command = {json.dumps(argv)}"]
    lines += [f"{k} = {v}" for k, v in extra.items()]
    return [*lines, ""]


def py_c(py: str, code: str) -> list[str]:
    return [py, "-c", code]


def userns_ok() -> bool:
    """Whether ``unshare -rm`` can bind-mount a file here (unprivileged user namespaces)."""
    probe = ["unshare", "-rm", "sh", "-c", "mount --bind /etc/hosts /etc/hosts"]
    try:
        return subprocess.run(probe, capture_output=True, timeout=30).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


# -- the kinds, one function per issue-16 class ------------------------------------------------


def services(rt: RedTeam, srv: Servers, want: Callable[[str], bool]) -> None:
    """Classes 1 and 2: endpoints outside the tree, with and without ``connect``."""
    client = (
        "import socket, sys\n"
        "s = socket.socket(socket.AF_UNIX) if sys.argv[1] == 'unix' else socket.socket()\n"
        "s.settimeout(5)\n"
        "s.connect(sys.argv[2] if sys.argv[1] == 'unix' else ('127.0.0.1', int(sys.argv[2])))\n"
        "print('value', s.recv(100).decode())\n"
    )
    clients = {
        "service-tcp": ["tcp", str(srv.port)],
        "service-unix": ["unix", srv.unix_path],
    }
    sends = {
        "udp-sendto": "s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
        f"s.sendto(b'x', ('127.0.0.1', {srv.udp_port}))\n",
        "udp-sendmsg": "s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
        f"s.sendmsg([b'x'], [], 0, ('127.0.0.1', {srv.udp_port}))\n",
        "unix-dgram-named-sendto": "s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)\n"
        "s.bind('\\0memotest-redteam-%d' % __import__('os').getpid())\n"
        f"s.sendto(b'x', {srv.dgram_path!r})\n",
    }
    quiet = {
        "unix-dgram-sendto": "s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)\n"
        "try:\n"
        f"    s.sendto(b'x', {srv.dgram_path!r})\n"
        "except OSError as e:\n"
        "    print('no receiver:', e)\n",
    }
    main = Proj(rt.base / "net")
    declared = Proj(rt.base / "declared")
    for proj, settings in (
        (main, []),
        (declared, ["[settings]", f'services = ["127.0.0.1:{srv.port}", "unix:{srv.unix_path}"]']),
    ):
        proj.root.mkdir(parents=True)
        (proj.root / "client.py").write_text(client)
        lines = [*settings, ""]
        for name, args in clients.items():
            lines += toml(name, [rt.py, "client.py", *args])
        if proj is main:
            for name, code in {**sends, **quiet}.items():
                lines += toml(name, py_c(rt.py, "import socket\n" + code))
        (proj.root / "memotest.toml").write_text("\n".join(lines))
    never = set(clients) | set(sends)
    if want("service") or want("network-no-connect") or want("network-sink"):
        rt.baseline(main, never)
    if want("service"):
        for name in clients:
            rt.case(
                "service",
                main,
                name,
                lambda: srv.set("2"),
                lambda: srv.set("1"),
                f"the data of the server at {clients[name][1]}",
            )
    if want("network-no-connect"):
        for name in sends:
            rt.case("network-no-connect", main, name, nothing, nothing, "rebuilt: never reused")
    if want("network-sink"):
        for name in quiet:
            rt.case(
                "network-sink",
                main,
                name,
                srv.drop_dgram,
                srv.restore_dgram,
                "the datagram receiver it sent to closed, its socket file removed",
            )
    if want("service-declared"):
        rt.baseline(declared)
        for name in clients:
            rt.case(
                "service-declared",
                declared,
                name,
                nothing,
                nothing,
                "declared in settings.services, data unchanged",
            )


def settings_shape(rt: RedTeam, want: Callable[[str], bool]) -> None:
    """Class 3: a setting that shaped the record (``ignore``) removed or changed.

    Each case has a project (and store) of its own: a run recorded under another case's
    settings holds every input it read, and replaying it is right (the store keeps many
    runs per target), so it would hide whether the hidden/**-shaped record is refused."""
    cases = [([], "ignore pattern removed"), (["hidden/*.log"], "changed")]
    for i, (ignore, detail) in enumerate(cases if want("settings-shape") else []):
        proj, cfg, settings = _shape_project(rt, f"shape{i}")
        change, undo = write(cfg, settings(ignore))
        detail = f"hidden/**: {detail}"
        rt.case("settings-shape", proj, "shaped", change, undo, detail, settle_force=True)
    if want("settings-shape-other"):
        proj, cfg, settings = _shape_project(rt, "shape-other")
        change, undo = write(cfg, settings(["hidden/**", "elsewhere/**"]))
        rt.case("settings-shape-other", proj, "shaped", change, undo, "elsewhere/** added")


def _shape_project(rt: RedTeam, name: str) -> tuple[Proj, Path, Callable[[list[str]], str]]:
    """A built project whose target reads a file its ``ignore`` setting hides."""
    proj = Proj(rt.base / name)
    files(proj.root, {"hidden/h.txt": "hidden\n", "seen.txt": "seen\n"})
    target = toml("shaped", py_c(rt.py, "open('hidden/h.txt').read(); open('seen.txt').read()"))
    cfg = proj.root / "memotest.toml"

    def settings(ignore: list[str]) -> str:
        return "\n".join(["[settings]", f"ignore = {json.dumps(ignore)}", "", *target])

    cfg.write_text(settings(["hidden/**"]))
    rt.baseline(proj)
    return proj, cfg, settings


def metadata(rt: RedTeam, want: Callable[[str], bool]) -> None:
    """Class 4: mode, entry type, a folder turned symlink, link count, mtime order."""
    proj = Proj(rt.base / "meta")
    r = proj.root
    files(
        r,
        {
            "tool.sh": "#!/bin/sh\necho ok\n",
            "entries/a": "1",
            "entries/b": "2",
            "data/x": "1",
            "real/x": "1",
            "linked.txt": "1",
            "links/.keep": "",
            "src.txt": "source\n",
            "gen.txt": "generated\n",
        },
    )
    os.chmod(r / "tool.sh", 0o755)
    old = time.time() - 3600
    os.utime(r / "src.txt", (old, old))
    os.utime(r / "gen.txt", (old + 60, old + 60))
    lines = [
        *toml("meta-exec", "./tool.sh"),
        *toml(
            "meta-type",
            py_c(
                rt.py,
                "import os\nprint(sorted(e.name for e in os.scandir('entries') if e.is_file()))",
            ),
        ),
        *toml(
            "meta-symlink",
            py_c(rt.py, "import os; print(os.path.islink('data'), open('data/x').read())"),
        ),
        *toml("meta-find", ["find", "entries", "-type", "f"]),
        *toml("meta-nlink", py_c(rt.py, "import os; print(os.stat('linked.txt').st_nlink)")),
        *toml(
            "meta-mtime",
            py_c(
                rt.py,
                "import os; print('up to date' if os.stat('gen.txt').st_mtime"
                " > os.stat('src.txt').st_mtime else 'stale')",
            ),
        ),
    ]
    (r / "memotest.toml").write_text("\n".join(lines))
    rt.baseline(proj)
    if want("metadata"):
        rt.case(
            "metadata",
            proj,
            "meta-exec",
            lambda: os.chmod(r / "tool.sh", 0o644),
            lambda: os.chmod(r / "tool.sh", 0o755),
            "chmod -x tool.sh (the command)",
        )

        def to_dir() -> None:
            (r / "entries/b").unlink()
            (r / "entries/b").mkdir()

        def to_file() -> None:
            (r / "entries/b").rmdir()
            (r / "entries/b").write_text("2")

        for t in ("meta-type", "meta-find"):
            rt.case("metadata", proj, t, to_dir, to_file, "entries/b: a file, now a folder")

        def to_link() -> None:
            shutil.rmtree(r / "data")
            os.symlink("real", r / "data")

        def to_folder() -> None:
            (r / "data").unlink()
            files(r, {"data/x": "1"})

        rt.case(
            "metadata",
            proj,
            "meta-symlink",
            to_link,
            to_folder,
            "data/: a folder, now a symlink to real/ (same entries)",
        )
        rt.case(
            "metadata",
            proj,
            "meta-nlink",
            lambda: os.link(r / "linked.txt", r / "links/second.txt"),
            lambda: (r / "links/second.txt").unlink(),
            "a hard link made to linked.txt (links/second.txt)",
        )
    if want("metadata-mtime"):
        rt.case(
            "metadata-mtime",
            proj,
            "meta-mtime",
            lambda: os.utime(r / "src.txt"),
            lambda: os.utime(r / "src.txt", (old, old)),
            "src.txt touched: now newer than gen.txt",
        )
    if want("metadata-other"):
        st = (r / "tool.sh").stat()
        rt.case(
            "metadata-other",
            proj,
            "meta-exec",
            lambda: os.utime(r / "tool.sh"),
            lambda: os.utime(r / "tool.sh", ns=(st.st_atime_ns, st.st_mtime_ns)),
            "tool.sh touched (same content and mode)",
        )


def umask_append(rt: RedTeam, want: Callable[[str], bool]) -> None:
    """Classes 5 and 6: the inherited umask; a file appended to, then read."""
    proj = Proj(rt.base / "state")
    files(proj.root, {"log.txt": "first\n", "log2.txt": "first\n"})
    append = (
        "import os\n"
        "with open('log.txt', 'a') as f:\n"
        "    f.write('run\\n')\n"
        "data = open('log.txt').read()\n"
        "os.truncate('log.txt', len(data.encode()) - 4)\n"
        "print(data.splitlines()[0])\n"
    )
    lines = [
        *toml("umask-get", py_c(rt.py, "import os; print(oct(os.umask(0)))")),
        *toml(
            "umask-create",
            py_c(
                rt.py, "import os; open('made.txt', 'w')\nprint(oct(os.stat('made.txt').st_mode))"
            ),
        ),
        *toml("append-then-read", py_c(rt.py, append)),
        *toml(
            "append-shell",
            ["sh", "-c", "echo run >> log2.txt && cat log2.txt && truncate -s -4 log2.txt"],
        ),
        *toml(
            "rlimit-get", py_c(rt.py, "import resource as r; print(r.getrlimit(r.RLIMIT_NOFILE))")
        ),
    ]
    (proj.root / "memotest.toml").write_text("\n".join(lines))
    rt.baseline(proj, times=3)
    if want("umask"):
        for t in ("umask-get", "umask-create"):
            rt.case("umask", proj, t, nothing, nothing, "built with umask 077", wrap=UMASK)
    if want("rlimit"):
        wrap = ["sh", "-c", 'ulimit -n 512 && exec "$@"', "sh"]
        rt.case(
            "rlimit", proj, "rlimit-get", nothing, nothing, "built with ulimit -n 512", wrap=wrap
        )
    if want("append-read"):
        for t, name in (("append-then-read", "log.txt"), ("append-shell", "log2.txt")):
            change, undo = write(proj.root / name, "other\n")
            rt.case("append-read", proj, t, change, undo, f"{name}: first line edited")


def glibc_files(rt: RedTeam, want: Callable[[str], bool]) -> None:
    """Class 7: files the C library reads by itself (time zones; NSS in a namespace)."""
    if not want("glibc-files"):
        return
    proj = Proj(rt.base / "glibc")
    r = proj.root
    paris = (ZONEINFO / "Europe/Paris").read_bytes()
    tokyo = (ZONEINFO / "Asia/Tokyo").read_bytes()
    (r / "zoneinfo/Soundness").mkdir(parents=True)
    (r / "zone").write_bytes(paris)
    (r / "zoneinfo/Soundness/Probe").write_bytes(paris)
    hour = py_c(rt.py, "import time; print(time.localtime(0).tm_hour)")
    lines = [
        *toml("glibc-tz", hour, env=f'{{ TZ = ":{r}/zone" }}'),
        *toml("glibc-tzdir", hour, env=f'{{ TZ = "Soundness/Probe", TZDIR = "{r}/zoneinfo" }}'),
    ]
    (r / "memotest.toml").write_text("\n".join(lines))
    rt.baseline(proj)
    for t, path in (("glibc-tz", r / "zone"), ("glibc-tzdir", r / "zoneinfo/Soundness/Probe")):
        change, undo = write(path, tokyo)
        rt.case("glibc-files", proj, t, change, undo, f"{path.relative_to(rt.base)}: Asia/Tokyo")
    if not userns_ok():
        rt.log("  glibc-files: no unprivileged user namespace: /etc/hosts, /etc/passwd skipped")
        return
    ns = rt.base / "ns"
    ns.mkdir()
    hosts, passwd = ns / "hosts", ns / "passwd"
    hosts.write_text(Path("/etc/hosts").read_text() + "\n127.0.0.2 soundness-probe\n")
    passwd.write_text(
        Path("/etc/passwd").read_text() + "soundness:x:4242:4242::/home/one:/bin/sh\n"
    )
    mount = 'mount --bind "$1" /etc/hosts && mount --bind "$2" /etc/passwd && shift 2 && exec "$@"'
    nsproj = Proj(ns, wrap=["unshare", "-rm", "sh", "-c", mount, "sh", str(hosts), str(passwd)])
    lines = [
        *toml(
            "glibc-hosts",
            py_c(rt.py, "import socket; print(socket.gethostbyname('soundness-probe'))"),
        ),
        *toml(
            "glibc-getaddrinfo",
            py_c(rt.py, "import socket; print(socket.getaddrinfo('soundness-probe', 80)[0][4])"),
        ),
        *toml("glibc-passwd", py_c(rt.py, "import pwd; print(pwd.getpwnam('soundness').pw_dir)")),
    ]
    (ns / "memotest.toml").write_text("\n".join(lines))
    rt.baseline(nsproj)
    text = hosts.read_text()
    for t in ("glibc-hosts", "glibc-getaddrinfo"):
        change, undo = write(hosts, text.replace("127.0.0.2 soundness", "127.0.0.3 soundness"))
        rt.case("glibc-files", nsproj, t, change, undo, "/etc/hosts (bound): entry edited")
    text = passwd.read_text()
    change, undo = write(passwd, text.replace("/home/one", "/home/two"))
    rt.case("glibc-files", nsproj, "glibc-passwd", change, undo, "/etc/passwd (bound): home edited")


def proc_dev(rt: RedTeam, want: Callable[[str], bool]) -> None:
    """Class 8: files named through ``/proc`` and ``/dev`` links, and ``/dev/shm``."""
    if not want("proc-dev"):
        return
    proj = Proj(rt.base / "procdev")
    r = proj.root
    tree = {"data/cwd.txt": "1\n", "data/root.txt": "1\n", "data/fd.txt": "1\n"}
    files(r, {**tree, "data/procfd.txt": "1\n"})
    shm = Path(f"/dev/shm/memotest-soundness-{os.getpid()}.txt")
    shm.write_text("1\n")
    try:
        read = "import sys; print(open(sys.argv[1]).read())"
        lines = [
            *toml("proc-cwd", [rt.py, "-c", read, "/proc/self/cwd/data/cwd.txt"]),
            *toml("proc-root", [rt.py, "-c", read, f"/proc/self/root{r}/data/root.txt"]),
            *toml("dev-fd", ["sh", "-c", "exec 3<data/fd.txt; cat /dev/fd/3"]),
            *toml("dev-shm", [rt.py, "-c", read, str(shm)]),
            *toml(
                "proc-fd",
                py_c(
                    rt.py,
                    "import os; fd = os.open('data/procfd.txt', os.O_RDONLY)\n"
                    "print(open(f'/proc/self/fd/{fd}').read())",
                ),
            ),
        ]
        (r / "memotest.toml").write_text("\n".join(lines))
        rt.baseline(proj)
        for t, path in (
            ("proc-cwd", r / "data/cwd.txt"),
            ("proc-root", r / "data/root.txt"),
            ("dev-fd", r / "data/fd.txt"),
            ("dev-shm", shm),
            ("proc-fd", r / "data/procfd.txt"),
        ):
            change, undo = write(path, "2\n")
            rt.case("proc-dev", proj, t, change, undo, f"{path}: edited")
    finally:
        shm.unlink(missing_ok=True)


def new_writer(rt: RedTeam, want: Callable[[str], bool]) -> None:
    """Class 9: a target edited to write what a cached target reads, in the same build."""
    proj = Proj(rt.base / "writer")
    files(proj.root, {"data.txt": "old"})
    cfg = proj.root / "memotest.toml"
    reader = [
        *toml("reader", py_c(rt.py, "print(open('data.txt').read())")),
        *toml("reader-absent", py_c(rt.py, "import os; print(os.path.exists('flag.txt'))")),
    ]

    def targets(writer: str) -> str:
        return "\n".join([*reader, *toml("writer", py_c(rt.py, writer))])

    cfg.write_text(targets("open('other.txt', 'w').write('x')"))
    rt.baseline(proj)
    for kind, content in (("new-writer", "new"), ("new-writer-same", "old")):
        if not want(kind):
            continue
        edited = targets(f"import time; time.sleep(1); open('data.txt', 'w').write({content!r})")
        change, undo_def = write(cfg, edited)

        def undo(undo_def: Change = undo_def) -> None:
            undo_def()
            (proj.root / "data.txt").write_text("old")

        detail = f"writer edited to write data.txt ({content!r}, was 'old')"
        rt.case(kind, proj, "reader", change, undo, detail, build=[])
    if want("new-writer"):
        edited = targets("import time; time.sleep(1); open('flag.txt', 'w').write('x')")
        change, undo_def = write(cfg, edited)

        def undo_flag() -> None:
            undo_def()
            (proj.root / "flag.txt").unlink()

        detail = "writer edited to create flag.txt, which the reader found absent"
        rt.case("new-writer", proj, "reader-absent", change, undo_flag, detail, build=[])


def code_lineno(rt: RedTeam, want: Callable[[str], bool]) -> None:
    """Class 10: a module body that records its own line numbers, held by its code."""
    if not (want("code-lineno") or want("code-lineno-other")):
        return
    proj = Proj(rt.base / "py", pytest="tests")
    modules = {
        "frame": "import sys\n\nLINE = sys._getframe().f_lineno\n",
        "inspected": "import inspect\n\nLINE = inspect.currentframe().f_lineno\n",
        "logged": (
            "import io\nimport logging\n\n"
            "stream = io.StringIO()\n"
            "log = logging.getLogger('soundness')\n"
            "handler = logging.StreamHandler(stream)\n"
            "handler.setFormatter(logging.Formatter('%(lineno)d'))\n"
            "log.addHandler(handler)\n"
            "log.propagate = False\n"
            "log.warning('where')\n"
            "LINE = int(stream.getvalue())\n"
        ),
    }
    modules["warned"] = (
        "import warnings\n\n"
        "with warnings.catch_warnings(record=True) as caught:\n"
        "    warnings.simplefilter('always')\n"
        "    warnings.warn('where')\n"
        "LINE = caught[0].lineno\n"
    )
    lines = {"frame": 3, "inspected": 3, "logged": 10, "warned": 5}
    tree = {
        "pyproject.toml": '[tool.pytest.ini_options]\npythonpath = ["."]\n',
        "lineno_pkg/__init__.py": "",
        "tests/__init__.py": "",
    }
    for name, text in modules.items():
        tree[f"lineno_pkg/{name}.py"] = text
        tree[f"tests/test_{name}.py"] = (
            f"from lineno_pkg import {name}\n\n\n"
            f"def test_line():\n    assert {name}.LINE == {lines[name]}\n"
        )
    files(proj.root, tree)
    rt.baseline(proj, times=2)
    held = rt.kinds_of(proj)
    for name in modules:
        path = proj.root / f"lineno_pkg/{name}.py"
        target = f"pytest:tests/test_{name}.py"
        how = "held as " + "+".join(sorted(set(held.get(str(path), ["nothing"]))))
        if want("code-lineno"):
            change, undo = write(path, "# soundness audit\n" + modules[name])
            detail = f"{path.name}: a comment line added at the top ({how})"
            rt.case("code-lineno", proj, target, change, undo, detail)
        if want("code-lineno-other"):
            change, undo = write(path, modules[name] + "# soundness audit\n")
            detail = f"{path.name}: a comment appended at the end ({how})"
            rt.case("code-lineno-other", proj, target, change, undo, detail)


def declared(rt: RedTeam, want: Callable[[str], bool]) -> None:
    """Class 11: declared inputs that are a glob and a folder."""
    if not (want("declared-glob") or want("declared-glob-other")):
        return
    proj = Proj(rt.base / "declared-inputs")
    r = proj.root
    files(r, {"data/glob/a.txt": "a\n", "data/glob/b.txt": "b\n", "data/tree/sub/x.txt": "x\n"})
    noop = py_c(rt.py, "pass")
    lines = [
        *toml("declared-glob", noop, inputs='["data/glob/*.txt"]'),
        *toml("declared-folder", noop, inputs='["data/tree"]'),
        *toml("declared-deep", noop, inputs='["data/tree/**/*.txt"]'),
    ]
    (r / "memotest.toml").write_text("\n".join(lines))
    rt.baseline(proj)
    if want("declared-glob"):
        for t, (change, undo), detail in (
            ("declared-glob", create(r / "data/glob/c.txt"), "data/glob/c.txt: a new match"),
            ("declared-glob", write(r / "data/glob/a.txt", "A\n"), "data/glob/a.txt: edited"),
            ("declared-folder", create(r / "data/tree/sub/new.txt"), "data/tree/sub/new.txt"),
            ("declared-folder", write(r / "data/tree/sub/x.txt", "X\n"), "data/tree/sub/x.txt"),
            ("declared-deep", create(r / "data/tree/sub/y.txt"), "data/tree/sub/y.txt: a match"),
        ):
            rt.case("declared-glob", proj, t, change, undo, detail)
    if want("declared-glob-other"):
        change, undo = create(r / "data/glob/c.dat")
        rt.case("declared-glob-other", proj, "declared-glob", change, undo, "data/glob/c.dat")
        change, undo = create(r / "data/beside.txt")
        rt.case("declared-glob-other", proj, "declared-folder", change, undo, "data/beside.txt")


def run(rt: RedTeam, want: Callable[[str], bool]) -> list[dict]:
    """Sets up ``redteam/`` and runs the wanted kinds; returns their cases."""
    shutil.rmtree(rt.base, ignore_errors=True)
    rt.base.mkdir(parents=True)
    if any(want(k) for k in ("service", "service-declared", "network-no-connect")):
        srv = Servers()
        try:
            services(rt, srv, want)
        finally:
            srv.close()
    if want("settings-shape") or want("settings-shape-other"):
        settings_shape(rt, want)
    if any(want(k) for k in ("metadata", "metadata-mtime", "metadata-other")):
        metadata(rt, want)
    if want("umask") or want("rlimit") or want("append-read"):
        umask_append(rt, want)
    glibc_files(rt, want)
    proc_dev(rt, want)
    if want("new-writer") or want("new-writer-same"):
        new_writer(rt, want)
    code_lineno(rt, want)
    declared(rt, want)
    return rt.results
