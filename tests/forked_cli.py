"""The suite's ``python -m memotest ...`` processes, forked from one that has imported memotest.

The suite starts memotest's command line a few thousand times (``conftest.memotest``), and
each fresh interpreter spent about 0.15 s of CPU starting Python and importing memotest and
its plugins before doing anything: a fifth of the suite's CPU. Here each xdist worker keeps
a *server*, a Python started as ``python -c SERVER`` that imports those modules once and
then forks, for each command line, a *keeper* that forks the command and waits for it. The
command is a real process of its own: its own argv, folder, environment and stdio (pipes to
the test, as ``subprocess.run(capture_output=True)`` gives), run by ``runpy`` as ``python
-m memotest`` runs it, ending the way an interpreter ends (``SystemExit``, an uncaught
exception, atexit, threads joined); only the start-up is shared.

A fresh interpreter is used instead (:func:`run` returns None) wherever the start-up could
differ: an environment whose variables Python reads while starting (``PYTHON*``, the locale,
``TZ``, a user site folder's ``HOME``) are not the server's, or no server could start.
``MEMOTEST_TEST_FRESH=1`` turns the server off for a whole run.

The keeper reports the command's pid (a timeout kills it, as ``subprocess.run`` does) and
then its exit status and CPU (``wait4``): :data:`children_cpu` adds that CPU up for the
suite's CPU recorder (``cpu_record.py``), since the commands are not the worker's children.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import selectors
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence

#: The server: imports what the commands import, then forks a keeper per request.
SERVER = r"""
import importlib, json, os, runpy, socket, sys

def preload():
    from memotest.load import entrypoints, plugins
    # What the commands import: the command line, the plugins, a build; what a run adds
    # (psutil watches it, threads run it); a memoized collection or tool driver (memo).
    for name in (*plugins.BUILTIN, "memotest.cli", "memotest.commands.build",
                 "memotest.commands.common", "memotest.commands.explain",
                 "memotest.commands.show", "memotest.loop.build", "memotest.memo",
                 "psutil", "concurrent.futures", "ctypes", "socket", "logging", "tomllib"):
        try:
            importlib.import_module(name)
        except ImportError:  # the command imports it, or says why, as a fresh one does
            pass
    for ep in entrypoints.entry_points(plugins.ENTRY_POINT_GROUP):
        try:
            ep.load()
        except Exception:  # the command reports it, as a fresh process does
            pass

def command(request, fds):
    # In the command's process: its stdio, folder, environment and argv, then memotest's
    # __main__ as `python -m memotest` runs it; whatever ends it ends the process.
    stdin, stdout, stderr = fds
    for fd, target in ((stdin, 0), (stdout, 1), (stderr, 2)):
        os.dup2(fd, target)
    for fd in set(fds):
        if fd > 2:
            os.close(fd)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    sys.path[0] = os.getcwd()
    sys.argv = ["-m", *request["args"]]  # runpy puts __main__.py's path in place of -m
    runpy.run_module("memotest", run_name="__main__", alter_sys=True)

def keeper(request, fds, reply):
    pid = os.fork()
    if pid == 0:
        reply.close()
        command(request, fds[:3])
        return
    for fd in fds[:3]:
        os.close(fd)
    reply.sendall(json.dumps({"pid": pid}).encode() + b"\n")
    _, status, usage = os.wait4(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    done = {"code": code, "user": usage.ru_utime, "sys": usage.ru_stime}
    reply.sendall(json.dumps(done).encode() + b"\n")
    os._exit(0)

def serve(control):
    while True:
        try:
            while os.waitpid(-1, os.WNOHANG)[0]:
                pass
        except ChildProcessError:
            pass
        message, fds, _, _ = socket.recv_fds(control, 1 << 20, 4)
        if not message:
            return
        sys.stdout.flush()
        sys.stderr.flush()
        if os.fork() == 0:
            control.close()
            reply = socket.socket(fileno=fds[3])
            keeper(json.loads(message), fds, reply)
            return
        for fd in fds:
            os.close(fd)

server = os.getpid()
control = socket.socket(fileno=int(sys.argv[1]))
preload()
control.sendall(b"ready")
serve(control)  # returns in the server at the requests' end, in a command when it ends
if os.getpid() == server:
    try:  # the keepers left, reaped: their CPU and their commands' count where ours does
        while True:
            os.wait()
    except ChildProcessError:
        pass
"""

#: What Python reads from its environment while it starts: a command whose environment
#: differs from the server's in these runs in a fresh interpreter.
START_VARIABLES = ("LANG", "LANGUAGE", "TZ")
START_PREFIXES = ("PYTHON", "LC_")

#: The CPU (user, sys seconds) of the commands this process had the server run.
children_cpu = [0.0, 0.0]

_lock = threading.Lock()
_server: tuple[subprocess.Popen, socket.socket, dict[str, str]] | None = None
_failed = False


def _start_view(env: Mapping[str, str]) -> dict[str, str]:
    view = {k: v for k, v in env.items() if k in START_VARIABLES or k.startswith(START_PREFIXES)}
    # The user site folder (~/.local/lib/pythonX.Y/site-packages) is on sys.path only
    # where the interpreter enables it; then HOME decides which one.
    import site

    if site.ENABLE_USER_SITE:
        view["HOME"] = env.get("HOME", "")
    return view


def _get_server() -> tuple[subprocess.Popen, socket.socket, dict[str, str]] | None:
    global _server, _failed
    if _server is not None and _server[0].poll() is None:
        return _server
    if _failed or os.environ.get("MEMOTEST_TEST_FRESH"):
        return None
    mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    env = dict(os.environ)
    proc = subprocess.Popen(
        [sys.executable, "-c", SERVER, str(theirs.fileno())],
        pass_fds=[theirs.fileno()],
        cwd="/",
        env=env,
        # Pipes, as the commands' stdio are: the server's sys.stdin, stdout and stderr are
        # the commands' Python objects, made for the kind of file they were made on (a
        # pipe cannot seek, is not a terminal).
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    for pipe in (proc.stdin, proc.stdout, proc.stderr):
        pipe.close()  # the server writes nothing: its commands get pipes of their own
    theirs.close()
    mine.settimeout(120)
    try:
        ready = mine.recv(16) == b"ready"
    except OSError:
        ready = False
    mine.settimeout(None)
    if not ready:
        proc.kill()
        proc.wait()
        _failed = True
        return None
    _server = (proc, mine, _start_view(env))
    return _server


def stop_server() -> None:
    """Ends this process's server, and waits for it (its CPU counts where ours does)."""
    global _server
    if _server is not None:
        proc, control, _ = _server
        control.close()  # the server reads the end of its requests and returns
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        _server = None


atexit.register(stop_server)  # conftest stops it sooner (an xdist worker may skip atexit)


def run(
    args: Sequence[str],
    cwd: str | os.PathLike | None,
    env: Mapping[str, str] | None,
    timeout: float,
    input: bytes | None,
) -> subprocess.CompletedProcess | None:
    """``python -m memotest ARGS`` as ``subprocess.run(capture_output=True)`` runs it,
    forked from the server; None where a fresh interpreter must run it."""
    env = dict(os.environ if env is None else env)
    folder = os.path.abspath(os.fspath(cwd) if cwd is not None else os.getcwd())
    if not os.path.isdir(folder):
        return None  # subprocess.run raises in the test, as before
    with _lock:
        server = _get_server()
        if server is None or _start_view(env) != server[2]:
            return None
        _, control, _ = server
        in_r, in_w = os.pipe()
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        reply, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        request = {
            "args": list(args),
            "cwd": folder,
            "env": env,
        }
        try:
            socket.send_fds(
                control, [json.dumps(request).encode()], [in_r, out_w, err_w, theirs.fileno()]
            )
        finally:
            for fd in (in_r, out_w, err_w):
                os.close(fd)
            theirs.close()
    cmd = [sys.executable, "-m", "memotest", *args]
    lines = reply.makefile("rb")
    try:
        pid = json.loads(lines.readline())["pid"]
        out, err, timed_out = _communicate(in_w, out_r, err_r, input, timeout, pid)
        status = json.loads(lines.readline())
    finally:
        lines.close()
        reply.close()
    children_cpu[0] += status["user"]
    children_cpu[1] += status["sys"]
    if timed_out:
        raise subprocess.TimeoutExpired(cmd, timeout, output=out, stderr=err)
    return subprocess.CompletedProcess(cmd, status["code"], out, err)


def _communicate(
    in_w: int, out_r: int, err_r: int, input: bytes | None, timeout: float, pid: int
) -> tuple[bytes, bytes, bool]:
    """Writes ``input``, reads both outputs to their end; kills ``pid`` at ``timeout``."""
    chunks: dict[int, list[bytes]] = {out_r: [], err_r: []}
    pending = memoryview(input or b"")
    deadline = time.monotonic() + timeout
    timed_out = False
    with selectors.DefaultSelector() as sel:
        sel.register(out_r, selectors.EVENT_READ)
        sel.register(err_r, selectors.EVENT_READ)
        if pending:
            os.set_blocking(in_w, False)
            sel.register(in_w, selectors.EVENT_WRITE)
        else:
            os.close(in_w)
        while sel.get_map():
            left = deadline - time.monotonic()
            if left <= 0 and not timed_out:
                timed_out = True
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            for key, _ in sel.select(timeout=max(left, 0.05) if not timed_out else 1.0):
                fd = key.fd
                if fd == in_w:
                    try:
                        pending = pending[os.write(in_w, pending[:65536]) :]
                    except BrokenPipeError:
                        pending = pending[:0]
                    if not pending:
                        sel.unregister(in_w)
                        os.close(in_w)
                    continue
                data = os.read(fd, 65536)
                if data:
                    chunks[fd].append(data)
                else:
                    sel.unregister(fd)
                    os.close(fd)
    return b"".join(chunks[out_r]), b"".join(chunks[err_r]), timed_out
