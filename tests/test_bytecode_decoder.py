"""The lean decoder (``memotest/worker/bytecode.py``) against ``dis.get_instructions``.

A wrong offset or argument value would make a quiet offset or a digest of the code report
wrong, and a run skipped that should not be: so every field the report reads is compared
with ``dis``'s, instruction by instruction, for every code object (recursively) of real
modules, the standard library's and memotest's own, and of a source that has what the
standard library may lack (``match``, ``except*``, every comparison and conversion,
instructions with one and two ``EXTENDED_ARG``); then the report's outputs (digests,
loud lines, default sites, class statements, quiet offsets) with the decoder and with
``dis`` as its source. In .ci/core-tests: the bytecode is each version's own.
"""

from __future__ import annotations

import dis
import functools
import importlib
import os
import sys
import sysconfig
from collections.abc import Iterator
from pathlib import Path
from types import CodeType

import pytest

from memotest.worker import bytecode, call_lines, class_lines, codes, first_line

REPO = Path(__file__).resolve().parent.parent

#: Modules of the standard library on 3.10-3.13 (a package by its ``__init__``): classes,
#: comprehensions, try/except, async, generators, f-strings, big bodies.
STDLIB = (
    "argparse",
    "ast",
    "asyncio.tasks",
    "collections",
    "contextlib",
    "dataclasses",
    "email._header_value_parser",
    "enum",
    "fractions",
    "json.decoder",
    "logging",
    "string",
    "typing",
    "zipfile",
)

#: Constructs a module of the standard library may not have, on every version.
SYNTHETIC = """
import sys
from os import path as p

NAMES = frozenset(("a", "b"))
JOINED = ", ".join(str(i) for i in range(3))
SIZE = len("abc")

class Plain:
    x = 1
    @property
    def value(self):
        return self.x

class Base:
    def method(self, x=1, *, y=2):
        return super().__init__() or x

class Child(Base, metaclass=type):
    attr: int = 3
    def method(self, x=1, *, y=2):
        return super().method(x, y=y) + __class__.attr

def matches(value):
    match value:
        case [1, 2, *rest] if rest:
            return rest
        case {"key": v, **kw}:
            return v, kw
        case Child(attr=3) | Base():
            return "class"
        case str() as s:
            return s
        case 1 | 2 | 3:
            return "small"
        case _:
            return None

def compares(a, b):
    return (a < b, a <= b, a == b, a != b, a > b, a >= b, a in b, a not in b,
            a is b, a is not b, not a, -a, ~a, +a)

def formats(x, w):
    return f"{x!r} {x!s} {x!a} {x:>{w}} {x!r:^10} {x = }"

def closure(n):
    total = 0
    def inner(k):
        nonlocal total
        total += k
        return total
    return [inner(i) for i in range(n)], {i: i for i in range(n)}, {i for i in range(n)}

def generator(items):
    yield from items
    x = yield
    return (y * 2 for y in items if y if x)

async def coroutine(source, lock):
    async with lock:
        async for item in source:
            await item
    return [x async for x in source], await lock

async def async_generator(n):
    for i in range(n):
        yield i

def tries(f):
    try:
        f()
    except (ValueError, TypeError) as e:
        del e
    except Exception:
        raise
    else:
        return 1
    finally:
        print("done")
    while f():
        if f(1):
            break
        continue
    with open(f) as a, open(f) as b:
        return a, b, (w := f()), lambda q=w: q
"""

#: Python 3.11+: exception groups.
EXCEPT_STAR = """
def groups(f):
    try:
        f()
    except* ValueError as e:
        print(e)
    except* (TypeError, KeyError):
        pass
"""


def _huge() -> str:
    """A function whose loop's jumps need two ``EXTENDED_ARG`` (more than 65536 code
    units: lines of attribute loads, each with caches from 3.11) and whose variables,
    names and constants need one (more than 256)."""
    names = [f"v{n}" for n in range(300)]
    lines = ["def huge(" + ", ".join(names[:10]) + "):"]
    lines += [f"    {name} = {n}.5" for n, name in enumerate(names)]
    lines += [f"    g{n} = G{n}" for n in range(300)]
    lines.append("    for item in range(3):")
    loads = 1700 if sys.version_info >= (3, 11) else 6600
    lines += ["        item.a.a.a.a.a.a.a.a.a"] * loads
    lines.append("    return v1")
    return "\n".join(lines) + "\n"


@functools.cache
def _stdlib(name: str) -> CodeType:
    """A standard module's code, from its file (not the frozen copy some start from)."""
    path = Path(sysconfig.get_path("stdlib"), *name.split("."))
    if path.is_dir():
        path = path / "__init__.py"
    path = path.with_suffix(".py")
    return compile(path.read_bytes(), str(path), "exec", dont_inherit=True)


@functools.cache
def _memotest(path: Path) -> CodeType:
    return compile(path.read_bytes(), str(path), "exec", dont_inherit=True)


#: memotest's own modules: those of the worker.
MEMOTEST = sorted((REPO / "memotest" / "worker").glob("*.py"))


def _corpus() -> Iterator[tuple[str, CodeType]]:
    """``(name, module code)``: the standard library's, memotest's, the synthetic ones."""
    for name in STDLIB:
        yield name, _stdlib(name)
    for path in MEMOTEST:
        yield str(path), _memotest(path)
    yield "synthetic", compile(SYNTHETIC, "synthetic", "exec", dont_inherit=True)
    if sys.version_info >= (3, 11):
        yield "except_star", compile(EXCEPT_STAR, "except_star", "exec", dont_inherit=True)
    yield "huge", compile(_huge(), "huge", "exec", dont_inherit=True)


def _walk(code: CodeType) -> Iterator[CodeType]:
    yield code
    for const in code.co_consts:
        if isinstance(const, CodeType):
            yield from _walk(const)


def _same(a: object, b: object) -> bool:
    """The same value: the same object, or an equal one of the same type (a constant 0
    taken for False, or 1 for 1.0, would be a wrong index)."""
    if a is b:
        return True
    if type(a) is not type(b):
        return False
    if type(a) is tuple:
        return len(a) == len(b) and all(map(_same, a, b))  # type: ignore[arg-type]
    return a == b


def _dis_line(i: dis.Instruction) -> int | None:
    """The line ``codes.digest`` took from ``dis``: ``positions.lineno`` from 3.11, else
    ``starts_line``."""
    positions = getattr(i, "positions", None)
    return positions.lineno if positions is not None else i.starts_line


def _as_decoded(instructions: list[dis.Instruction]) -> tuple[bytecode.Instruction, ...]:
    """``dis``'s instructions with the fields the decoder gives."""
    return tuple(
        bytecode.Instruction(i.offset, i.opname, i.opcode, i.arg, i.argval) for i in instructions
    )


def _by_dis(code: CodeType) -> tuple[bytecode.Instruction, ...]:
    """``dis.get_instructions(code)``, with the fields the decoder gives."""
    return _as_decoded(list(dis.get_instructions(code)))


def _lines_by_dis(code: CodeType):
    """``bytecode.lines(code)`` from ``dis.get_instructions(code)``."""
    return {i.offset: _dis_line(i) for i in dis.get_instructions(code)}.__getitem__


def test_every_field_is_dis_s_for_every_instruction_of_many_modules():
    """Offset, name, opcode, argument, its value and line of every instruction of every
    code object of the corpus, as ``dis`` gives them (with ``codes.digest``'s line)."""
    assert bytecode.LEAN, "memotest supports 3.10-3.13: each decoded here"
    kinds_seen: set[int] = set()
    counted = 0
    args: list[int] = []
    for name, module in _corpus():
        for code in _walk(module):
            lean = bytecode.decode(code)
            line = bytecode.lines(code)
            theirs = list(dis.get_instructions(code))
            assert [line(i.offset) for i in theirs] == [_dis_line(i) for i in theirs]
            reference = _as_decoded(theirs)
            where = (name, getattr(code, "co_qualname", code.co_name))
            if lean != reference:
                diff = next(((a, b) for a, b in zip(lean, reference, strict=False) if a != b), None)
                raise AssertionError((where, len(lean), len(reference), diff))
            # Equal, and each value of the same type (a constant 0 for False would be a
            # wrong index: equal, but not the same).
            for mine, theirs in zip(lean, reference, strict=True):
                assert _same(mine.argval, theirs.argval), (where, mine, theirs)
                kinds_seen.add(bytecode._KINDS[mine.opcode][0])
                if mine.arg is not None:
                    args.append(mine.arg)
            counted += len(lean)
    assert counted > 100_000
    # Each way of decoding an argument this version has was taken, and both widths of
    # EXTENDED_ARG: a corpus that missed one would prove nothing of it.
    table = {kind for kind, _p, _q in bytecode._KINDS}
    assert table - kinds_seen == set(), table - kinds_seen
    assert max(args) >= 1 << 16


FLAGGED = [("LOAD_GLOBAL", (3, 11), 1), ("LOAD_ATTR", (3, 12), 1), ("LOAD_SUPER_ATTR", (3, 12), 2)]


@pytest.mark.parametrize(("opname", "since", "shift"), FLAGGED)
def test_a_names_flag_bits_are_shifted_off_where_the_version_has_them(opname, since, shift):
    """``LOAD_GLOBAL`` (3.11+), ``LOAD_ATTR`` and ``LOAD_SUPER_ATTR`` (3.12+) keep flags in
    their argument's low bits: the name is the one ``co_names`` holds past them."""
    if sys.version_info < since:
        pytest.skip(f"{opname}'s argument has no flag bits before {since}")
    code = compile(SYNTHETIC, "synthetic", "exec", dont_inherit=True)
    found = [i for c in _walk(code) for i in bytecode.decode(c) if i.opname == opname and i.arg & 1]
    assert found
    for i in found:
        assert i.argval != i.arg
        code_names = next(c for c in _walk(code) if i in bytecode.decode(c)).co_names
        assert i.argval == code_names[i.arg >> shift]


def _report(module: CodeType, namespace: dict | None) -> list[object]:
    """Every output of the code report that reads instructions, for the module and class
    bodies of ``module``: digests without lines (with no quiet offsets, with some, with
    unseen default values), loud lines, default sites, a class body's first line, the
    class statements and, with ``namespace``, the quiet offsets of both readers."""
    out: list[object] = []
    for key, (code, body) in codes.tree(module).items():
        if not body:
            continue  # a function's digest takes its bytes, lines and all
        offsets = [i.offset for i in codes.instructions(code)]
        out.append((key, codes.digest(code, False), codes.digest(code, False, offsets[::3])))
        out.append(codes.digest(code, False, [-1 - x for x in offsets[::2]]))
        out.append(codes._loud_lines(code, ()))
        out.append([(id(c), s) for c, s in codes.default_sites(code)])
        out.append(first_line.first_line_const(code))
    statements = class_lines.class_statements(module)
    out.append([(id(b), len(p), len(a), n) for b, p, a, n in statements])
    if namespace is not None:
        classes = class_lines.quiet_offsets(module, namespace)
        out.append(sorted((id(c), o) for c, o in classes.items()))
        out.append([(id(c), o) for c, o in call_lines.quiet_offsets(module, namespace)])
    return out


def test_the_code_reports_outputs_are_those_of_dis(monkeypatch):
    """The readers read nothing of an instruction but what the decoder gives: their
    outputs are the same with ``dis`` as its source."""
    synthetic = compile(SYNTHETIC, "synthetic", "exec")
    namespace: dict = {"__name__": "synthetic"}
    exec(synthetic, namespace)
    modules = [(synthetic, namespace)]
    modules += [(_stdlib(name), vars(importlib.import_module(name))) for name in STDLIB]
    modules += [(_memotest(path), None) for path in MEMOTEST]
    classes = calls = 0
    for module, namespace in modules:
        bytecode._DECODED.clear()
        lean = _report(module, namespace)
        with monkeypatch.context() as patch:
            patch.setattr(bytecode, "decode", _by_dis)
            patch.setattr(codes, "lines", _lines_by_dis)
            bytecode._DECODED.clear()
            assert _report(module, namespace) == lean, module.co_filename
        if namespace is not None:
            classes += bool(lean[-2])
            calls += bool(lean[-1])
    bytecode._DECODED.clear()
    # Quiet offsets of classes and of calls were found in several modules: compared,
    # not only empty lists.
    assert classes >= 3 and calls >= 3, (classes, calls)


def test_a_version_not_checked_here_is_decoded_by_dis(monkeypatch):
    """Before 3.10 or after 3.13 the decoder is ``dis`` itself: the same fields."""
    module = compile(SYNTHETIC, "synthetic", "exec", dont_inherit=True)
    lean = [(bytecode.decode(c), bytecode.lines(c)) for c in _walk(module)]
    monkeypatch.setattr(bytecode, "LEAN", False)
    for code, (instructions, line) in zip(_walk(module), lean, strict=True):
        assert bytecode.decode(code) == instructions
        if sys.version_info >= (3, 11):  # 3.10's dis has no positions: its lines are lean
            by_dis = bytecode.lines(code)
            assert [by_dis(i.offset) for i in instructions] == [
                line(i.offset) for i in instructions
            ]


QUICKENED = """
import os

class Point:
    def __init__(self, x):
        self.x = x

def hot(n):
    total = 0
    for i in range(n):
        p = Point(i)
        total += p.x + len(os.sep) + (i if i % 2 else -i)
    return total
"""


def test_code_that_ran_specialized_or_monitored_decodes_as_compiled():
    """A body the run executed was specialized by the interpreter (3.11+) and may be
    instrumented by ``sys.monitoring`` (3.12+): its ``co_code``, which the decoder reads,
    is still the compiled bytecode."""
    namespace: dict = {}
    exec(compile(QUICKENED, "quickened", "exec"), namespace)
    hot = namespace["hot"]
    compiled = compile(QUICKENED, "quickened", "exec")
    expected = bytecode.decode(next(c for c in _walk(compiled) if c.co_name == "hot"))
    monitoring = getattr(sys, "monitoring", None)
    tool = 5
    if monitoring is not None:
        monitoring.use_tool_id(tool, "test_bytecode_decoder")
        monitoring.register_callback(tool, monitoring.events.LINE, lambda code, line: None)
        monitoring.set_local_events(tool, hot.__code__, monitoring.events.LINE)
    try:
        assert hot(2000) == sum(i + len(os.sep) + (i if i % 2 else -i) for i in range(2000))
        if sys.version_info >= (3, 11):  # specialized: the adaptive code differs
            assert hot.__code__._co_code_adaptive != hot.__code__.co_code
        decoded = bytecode.decode(hot.__code__)
        assert decoded == expected
        assert all(map(_same, [i.argval for i in decoded], [i.argval for i in expected]))
    finally:
        if monitoring is not None:
            monitoring.set_local_events(tool, hot.__code__, 0)
            monitoring.free_tool_id(tool)
