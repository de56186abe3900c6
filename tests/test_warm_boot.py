"""``memotest/worker/boot.py``: a worker runs the code memotest compiled for it only when
its interpreter would have compiled the same (magic number, ``-O`` level); else it
compiles each module's source, as before (``memotest/tracer/warm/command.py``)."""

from __future__ import annotations

import marshal
import os
import subprocess
import sys

from memotest.tracer.warm.command import COMPILED, HERE, MODULES, escaped, worker_argv

#: Loads one module as a worker's ``main`` would (``load_compiled``), prints its ``X``.
DRIVER = """
import sys
boot = {"__name__": "boot"}
exec(open(sys.argv[1]).read(), boot)
boot["load_compiled"](sys.argv[3:], boot["compiled_here"](sys.argv[2]))
print(sys.modules["_memotest_worker.m"].X)
"""


#: Prints the bytes ``boot.py``'s ``unescaped`` gets back from its argument.
DRIVE_BYTES = """
import sys
boot = {"__name__": "boot"}
exec(open(sys.argv[1]).read(), boot)
sys.stdout.buffer.write(boot["unescaped"](sys.argv[2]))
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
    code = os.fsdecode(escaped(marshal.dumps(compiled)))
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
        data = os.fsencode(code).replace(b"\x01\x03", b"\x00").replace(b"\x01\x02", b"\x01")
        assert marshal.loads(data).co_code == expected.co_code, name


def test_every_byte_passes_escaped():
    data = bytes(range(256)) + b"\x01\x03\x01\x02\x00\x01\x01\x00\x00"
    assert b"\x00" not in escaped(data)
    out = subprocess.run(
        [sys.executable, "-c", DRIVE_BYTES, str(HERE / "boot.py"), os.fsdecode(escaped(data))],
        capture_output=True,
        check=True,
    )
    assert out.stdout == data
