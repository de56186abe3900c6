"""``memotest/worker/boot.py``: a worker runs the code memotest compiled for it only when
its interpreter would have compiled the same (magic number, ``-O`` level); else it
compiles each module's source, as before (``memotest/tracer/warm/command.py``)."""

from __future__ import annotations

import marshal
import os
import subprocess
import sys

from memotest.tracer.warm.command import COMPILED, HERE, MODULES, worker_argv

#: Loads one module as a worker's ``main`` would (``load_compiled``), prints its ``X``.
DRIVER = """
import sys
boot = {"__name__": "boot"}
exec(open(sys.argv[1]).read(), boot)
boot["load_compiled"](sys.argv[3:], boot["compiled_here"](sys.argv[2]))
print(sys.modules["_memotest_worker.m"].X)
"""


def loaded(tag: str, code: str, **env: str) -> str:
    source = "X = 'from the source'"
    argv = [str(HERE / "boot.py"), tag, "m", "/nowhere/m.py", source, code]
    out = subprocess.run(
        [sys.executable, "-c", DRIVER, *argv],
        env=dict(os.environ, **env),
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout.strip()


def test_the_code_runs_only_where_it_was_compiled_for():
    compiled = compile("X = 'from the code'", "/nowhere/m.py", "exec", optimize=0)
    code = marshal.dumps(compiled).hex()
    assert loaded(COMPILED, code) == "from the code"
    other_magic = "compiled:00000d0a:0"
    assert loaded(other_magic, code) == "from the source"
    assert loaded(COMPILED, code, PYTHONOPTIMIZE="1") == "from the source"
    assert loaded(COMPILED, "") == "from the source"  # too long to pass: compiled there


def test_the_command_line_carries_each_module_compiled_from_its_source():
    argv = worker_argv(sys.executable, {}, listings=False)
    at = argv.index(COMPILED)
    quads = [argv[i : i + 4] for i in range(at + 1, len(argv), 4)]
    assert [name for name, *_ in quads][: len(MODULES)] == list(MODULES)
    for name, path, source, code in quads:
        expected = compile(source, path, "exec", dont_inherit=True)
        assert marshal.loads(bytes.fromhex(code)).co_code == expected.co_code, name
