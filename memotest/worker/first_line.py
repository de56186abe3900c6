"""A class body's first line, a constant since Python 3.13 (``__firstlineno__``): which
constant it is, and what stands for it in a digest (``codes.digest``) of a class body whose
instructions a run vouched for (``class_lines.py``). Of the standard library only, in
Python 3.10 syntax: it runs in the warm worker too (``memotest/worker/__init__.py``)."""

import dis

from .bytecode import instructions


class _FirstLine:
    """Stands for a class body's ``__firstlineno__`` constant in its digest."""

    def __repr__(self):
        return "<first line>"


FIRST_LINE = _FirstLine()


def first_line_const(code):
    """Python 3.13+: the index in ``co_consts`` of a class body's first line, which the
    body stores as ``__firstlineno__`` right after ``__qualname__``, when no other
    instruction loads that constant (an equal number used elsewhere in the body shares
    it: then None, and it counts)."""
    ins = [i for i in instructions(code) if i.opname != "EXTENDED_ARG"]
    for n, i in enumerate(ins[:8]):
        if i.opname == "STORE_NAME" and i.argval == "__firstlineno__":
            load = ins[n - 1] if n else None
            if load is None or load.opname != "LOAD_CONST" or type(load.argval) is not int:
                return None
            users = [x for x in ins if x.opcode in dis.hasconst and x.arg == load.arg]
            return load.arg if len(users) == 1 else None
    return None
