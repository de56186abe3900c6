"""A code object's instructions, decoded as ``dis.get_instructions`` decodes them, cheaply.

A run's code report (``codes.py``, ``class_lines.py``, ``call_lines.py``,
``first_line.py``, ``defaults_seen.py``) reads the instructions of every module and
class body the run imported; ``dis.get_instructions`` is pure Python and makes for each
instruction a representation, positions and jump labels nobody reads there. This module
decodes only what those readers read, for each instruction (one ``dis`` yields, in its
order: ``EXTENDED_ARG`` included, the inline ``CACHE`` entries of Python 3.11+ left out):

* ``offset``, ``opname``, ``opcode``, ``arg``: as ``dis.Instruction``'s;
* ``argval``: as ``dis.Instruction``'s, on the interpreter that runs this: the constant,
  the name (``LOAD_GLOBAL``'s and, from 3.12, ``LOAD_ATTR``'s and ``LOAD_SUPER_ATTR``'s
  index shifted past their flag bits), the local or free variable, the jump's target
  (backward jumps, the target past the instruction's caches from 3.12), the comparison,
  ``FORMAT_VALUE``'s and ``CONVERT_VALUE``'s conversion, 3.13's pairs of locals, 3.11's
  ``dis.UNKNOWN`` for a constant of ``KW_NAMES``; else ``arg`` (None without one);
* and, by :func:`lines` (only a digest reads them), its line as ``codes.digest`` has
  always taken it: ``positions.lineno`` from Python 3.11 (``co_lines()``, which reads
  the same table), ``starts_line`` on 3.10 (the line when the instruction starts one,
  else None).

Each version's rules are read from ``dis``'s own tables (which opcode has a constant, a
name, a jump, how many caches) when this module is imported. On a version it was not
checked against (before 3.10, after 3.13) it takes ``dis.get_instructions`` itself.
``tests/test_bytecode_decoder.py`` compares every field with ``dis``'s, instruction by
instruction, for every code object of many modules; a wrong offset or value would make a
quiet offset or a digest wrong, and a run skipped that should not be.

Of the standard library only, in Python 3.10 syntax: it runs in the warm worker too
(``memotest/worker/__init__.py``).
"""

import dis
import sys
from collections import namedtuple
from functools import partial

#: One instruction. Offset first: two instructions of a body compare unequal at once.
Instruction = namedtuple("Instruction", "offset opname opcode arg argval")
_MAKE = partial(tuple.__new__, Instruction)

VERSION = sys.version_info[:2]
#: Whether this interpreter's bytecode is decoded here, not by ``dis``.
LEAN = (3, 10) <= VERSION <= (3, 13)

# What an opcode's argument is (its argval), by kind:
_NONE = 0  # no argument: arg and argval None
_PLAIN = 1  # argval = arg
_EXTENDED = 2  # EXTENDED_ARG: argval = arg, and the next argument's high bits
_CONST = 3  # co_consts[arg]
_UNKNOWN = 4  # dis.UNKNOWN (3.11: a constant of KW_NAMES)
_NAME = 5  # co_names[arg >> shift]
_JUMP = 6  # offset + base + sign * 2 * arg
_ABSOLUTE = 7  # 2 * arg
_NO_TARGET = 8  # None (3.13: a jump with no target)
_LOCAL = 9  # the variable (co_varnames on 3.10, else _varname_from_oparg)
_CELL = 10  # 3.10: (co_cellvars + co_freevars)[arg]
_PAIR = 11  # 3.13: two variables, arg >> 4 and arg & 15
_COMPARE = 12  # dis.cmp_op[arg >> shift]
_FORMAT = 13  # FORMAT_VALUE: (conversion, with a format spec)
_CONVERT = 14  # 3.13's CONVERT_VALUE: the conversion

_INT_OVERFLOW = 2**31  # 3.11+: an argument is a C int, EXTENDED_ARG's may wrap


def _caches(deop):
    """How many inline cache entries follow the opcode ``deop``."""
    if VERSION < (3, 11):
        return 0
    if VERSION < (3, 13):
        return dis._inline_cache_entries[deop]
    return dis._get_cache_size(dis._all_opname[deop])


def _kind(op):
    """``(kind, parameter, parameter)`` of the opcode ``op``: the branch of ``dis``'s
    decoding its argument takes, in ``dis``'s order, on this version."""
    deop = dis._deoptop(op) if VERSION >= (3, 11) else op
    if not (deop in dis.hasarg if VERSION >= (3, 12) else deop >= dis.HAVE_ARGUMENT):
        return (_NONE, 0, 0)
    if deop == dis.EXTENDED_ARG:
        return (_EXTENDED, 0, 0)
    name = dis.opname[deop]
    if deop in dis.hasconst:
        if VERSION == (3, 11) and name != "LOAD_CONST":
            return (_UNKNOWN, 0, 0)
        return (_CONST, 0, 0)
    if deop in dis.hasname:
        if VERSION >= (3, 11) and name == "LOAD_GLOBAL":
            return (_NAME, 1, 0)
        if VERSION >= (3, 12) and name == "LOAD_ATTR":
            return (_NAME, 1, 0)
        if VERSION >= (3, 12) and name == "LOAD_SUPER_ATTR":
            return (_NAME, 2, 0)
        return (_NAME, 0, 0)
    if VERSION >= (3, 13):
        if deop in dis.hasjump or deop in dis.hasexc:
            return _jump(deop)
        if name in ("LOAD_FAST_LOAD_FAST", "STORE_FAST_LOAD_FAST", "STORE_FAST_STORE_FAST"):
            return (_PAIR, 0, 0)
    elif deop in dis.hasjabs or deop in dis.hasjrel:
        return _jump(deop)
    if VERSION < (3, 11):
        if deop in dis.haslocal:
            return (_LOCAL, 0, 0)
        if deop in dis.hascompare:
            return (_COMPARE, 0, 0)
        if deop in dis.hasfree:
            return (_CELL, 0, 0)
    else:
        if deop in dis.haslocal or deop in dis.hasfree:
            return (_LOCAL, 0, 0)
        if deop in dis.hascompare:
            return (_COMPARE, {(3, 11): 0, (3, 12): 4}.get(VERSION, 5), 0)
    if name == "FORMAT_VALUE" and VERSION < (3, 13):
        return (_FORMAT, 0, 0)
    if name == "CONVERT_VALUE" and VERSION >= (3, 13):
        return (_CONVERT, 0, 0)
    return (_PLAIN, 0, 0)


def _jump(deop):
    """The kind of a jump: its target from its offset and argument."""
    if deop in dis.hasjabs:
        return (_ABSOLUTE, 0, 0)
    if deop not in dis.hasjrel:
        return (_NO_TARGET, 0, 0)
    backward = VERSION >= (3, 11) and dis._is_backward_jump(deop)
    sign = -2 if backward else 2
    base = 2 + 2 * _caches(deop) if VERSION >= (3, 12) else 2
    return (_JUMP, base, sign)


if LEAN:
    try:  # dis's private tables: a patch release without one of them takes dis's path
        _OPNAME = list(dis._all_opname if VERSION >= (3, 11) else dis.opname)[:256]
        _KINDS = [_kind(op) for op in range(256)]
        _CACHES = [_caches(dis._deoptop(op) if VERSION >= (3, 11) else op) for op in range(256)]
        #: Per opcode: its kind and parameters, its size with its caches, its name.
        _TABLE = [(*_KINDS[op], 2 + 2 * _CACHES[op], _OPNAME[op]) for op in range(256)]
        if VERSION < (3, 13):
            _CONVERSIONS = tuple(c for c, _ in dis.FORMAT_VALUE_CONVERTERS)
        else:
            _CONVERSIONS = (None, str, repr, ascii)
        _CMP_OP = dis.cmp_op
        _UNKNOWN_VALUE = getattr(dis, "UNKNOWN", None)
    except (AttributeError, IndexError, KeyError, TypeError):
        LEAN = False


def lines(code):
    """``line(offset)``: the line of the instruction at ``offset`` of ``code`` as
    ``codes.digest`` takes it (see the module's docstring): ``positions.lineno`` from
    Python 3.11 (the line ``co_lines()`` gives its code unit), ``starts_line`` on 3.10
    (the line when the instruction starts one, as ``dis.findlinestarts``, else None)."""
    if not LEAN:
        found = {i.offset: i.positions.lineno for i in dis.get_instructions(code)}
        return found.__getitem__
    if VERSION < (3, 11):
        starts, last = {}, None
        for start, _end, line in code.co_lines():
            if line is not None and line != last:
                last = starts[start] = line
        return starts.get
    units = []
    for start, end, line in code.co_lines():
        units += [line] * ((end - start) >> 1)
    return lambda offset: units[offset >> 1]


def decode(code):
    """The instructions of ``code`` (see the module's docstring), as a tuple."""
    if not LEAN:
        return tuple(
            Instruction(i.offset, i.opname, i.opcode, i.arg, i.argval)
            for i in dis.get_instructions(code)
        )
    raw = code.co_code
    consts, names = code.co_consts, code.co_names
    old = VERSION < (3, 11)
    if old:
        varname = code.co_varnames.__getitem__
        cells = code.co_cellvars + code.co_freevars
    else:
        varname = code._varname_from_oparg
    table = _TABLE
    out = []
    append = out.append
    extended = offset = 0
    size = len(raw)
    while offset < size:
        op = raw[offset]
        kind, p, q, step, opname = table[op]
        if kind == _NONE:
            append((offset, opname, op, None, None))
            extended = 0
            offset += step
            continue
        arg = argval = raw[offset + 1] | extended
        extended = 0
        if kind == _CONST:
            argval = consts[arg]
        elif kind == _NAME:
            argval = names[arg >> p]
        elif kind == _PLAIN:
            pass
        elif kind == _LOCAL:
            argval = varname(arg)
        elif kind == _JUMP:
            argval = offset + p + q * arg
        elif kind == _EXTENDED:
            extended = arg << 8
            if extended >= _INT_OVERFLOW and not old:
                extended -= 2 * _INT_OVERFLOW
        elif kind == _COMPARE:
            argval = _CMP_OP[arg >> p]
        elif kind == _PAIR:
            argval = (varname(arg >> 4), varname(arg & 15))
        elif kind == _FORMAT:
            argval = (_CONVERSIONS[arg & 0x3], bool(arg & 0x4))
        elif kind == _CONVERT:
            argval = _CONVERSIONS[arg]
        elif kind == _CELL:
            argval = cells[arg]
        elif kind == _ABSOLUTE:
            argval = arg * 2
        elif kind == _UNKNOWN:
            argval = _UNKNOWN_VALUE
        elif kind == _NO_TARGET:
            argval = None
        append((offset, opname, op, arg, argval))
        offset += step
    return tuple(map(_MAKE, out))


_DECODED = {}  # id(code) -> (code, its instructions): held, so the id is not reused


def instructions(code):
    """:func:`decode` ``(code)``, decoded once (a run's code report reads each module body
    it imported three times); at most 4096 code objects kept."""
    found = _DECODED.get(id(code))
    if found is None or found[0] is not code:
        if len(_DECODED) >= 4096:
            _DECODED.clear()
        found = _DECODED[id(code)] = (code, decode(code))
    return found[1]
