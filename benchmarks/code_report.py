"""The CPU of a run's code report: its bytecode decoded by ``dis`` against the lean decoder.

A forked run ends with a code report (``memotest/worker/code_watch.py``): for each module
body of the project it imported, the class statements and calls that ran no Python code
(``class_lines``, ``call_lines``) and the default values nothing saw (``default_sites``),
each read from the body's instructions (``memotest/worker/bytecode.py``). This imports
the modules of the packages given, then times that report over their module bodies with
every code object decoded anew (a run decodes each once), with ``dis.get_instructions``
(the decoder before) and with the lean one; and the decoding alone of the module and class
bodies. Run it with the interpreter of the project::

    .bench/venv-keystoneauth1/bin/python benchmarks/code_report.py keystoneauth1

Prints the median of ``--repeat`` rounds, in CPU ms, of each.
"""

from __future__ import annotations

import argparse
import dis
import importlib
import pkgutil
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from memotest.worker import bytecode, code_watch, codes, defaults_seen


def _modules(packages: list[str]) -> list[tuple[object, dict]]:
    """``(module body's code, namespace)`` of every module of ``packages`` that imports."""
    names = []
    for name in packages:
        package = importlib.import_module(name)
        names.append(name)
        for info in pkgutil.walk_packages(getattr(package, "__path__", []), name + "."):
            last = info.name.rsplit(".", 1)[-1]
            if ".tests." not in info.name + "." and last not in ("__main__", "tests"):
                names.append(info.name)
    out = []
    for name in names:
        try:
            module = importlib.import_module(name)
        except Exception:
            continue
        path = getattr(module, "__file__", None)
        if path and path.endswith(".py"):
            code = compile(Path(path).read_bytes(), path, "exec", dont_inherit=True)
            out.append((code, vars(module)))
    return out


def _by_dis(code):
    return tuple(dis.get_instructions(code))


def _report(modules) -> None:
    for code, namespace in modules:
        code_watch.module_quiet(code, namespace)
        defaults_seen.default_sites(code)


def _bodies(modules) -> list:
    return [c for code, _ns in modules for c, body in codes.tree(code).values() if body]


def _time(work, decode, rounds: int) -> float:
    bytecode.decode = decode
    found = []
    for _ in range(rounds):
        bytecode._DECODED.clear()
        t0 = time.process_time()
        work()
        found.append(time.process_time() - t0)
    bytecode._DECODED.clear()
    return statistics.median(found) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("packages", nargs="+")
    parser.add_argument("--repeat", type=int, default=9)
    args = parser.parse_args()
    lean = bytecode.decode
    modules = _modules(args.packages)
    bodies = _bodies(modules)
    version = sys.version.split()[0]
    print(f"{len(modules)} modules, {len(bodies)} module and class bodies, Python {version}")
    for label, work in (
        ("code report", lambda: _report(modules)),
        ("decoding the bodies", lambda: [bytecode.instructions(c) for c in bodies]),
    ):
        before = _time(work, _by_dis, args.repeat)
        after = _time(work, lean, args.repeat)
        print(f"{label}: {before:.1f} ms with dis, {after:.1f} ms lean ({before / after:.1f}x)")


if __name__ == "__main__":
    main()
