"""Module-level calls no Python code could observe (run side).

A call of a module body runs code while the module's frame is at the call's line: a
callee that is Python code can read that line (``sys._getframe(1).f_lineno``, ``inspect``,
a warning's ``stacklevel``, logging), and so can the Python code a C function calls back
(``map``, ``sorted``'s key, ``int``'s ``__int__``, a ``str`` subclass's method, a module's
``__getattr__``). A statement whose every call is of a C function of the interpreter on
built-in values (``tuple(int(v) for v in requests.__version__.split('.'))``: a version
string parsed into a tuple) runs no Python code but a generator expression of the module's
own, whose calls are of the same kind: nothing there can read a frame.
:func:`quiet_offsets` finds such statements once the module is made, by following each
statement's instructions over what their operands are (an exact built-in type, never a
subclass; a value read from a name or a plain module's attribute); the record keeps the
offsets it vouched for, of the module's body and of the generator expressions, and the
digests leave their lines out (``codes._loud_lines``), as for ``class_lines.py``.
``tests/test_codelevel_calls.py`` is the red team.

Out of reach, as for ``class_lines.py``: the names are resolved when the run ends (a name
the module binds once, before the statement and outside any loop; a builtin the module
never binds; a plain module's attribute), so a value another module's code changed after
the statement ran is taken as it is then (only immutable values are taken: a ``str``, an
``int``...); a garbage collection or weakref callback running Python code in the middle;
a trace or profile function of the run (``sys.settrace``, ``sys.setprofile``), which sees
every line.

Standard library only, Python 3.10 syntax: it runs in the worker
(``memotest/worker/__init__.py``).
"""

import builtins
import sys

from .class_lines import _module_attribute
from .codes import _PRESET, _QUIET, _dropping, _hashing, instructions

#: The exact types of the values followed: built-in, immutable, whose methods below and
#: whose conversions by the builtins below run C code only.
SIMPLE = (str, int, float, bool, type(None), bytes)
#: ``str``'s methods followed, by what they return (a ``str``, a ``bool``, a sequence of
#: ``str``); their arguments must be of :data:`SIMPLE` types (``join``'s: a sequence).
_STR_METHODS = {
    **dict.fromkeys(("strip", "lstrip", "rstrip", "lower", "upper", "casefold", "replace"), str),
    **dict.fromkeys(("startswith", "endswith", "isdigit", "isdecimal", "isalnum"), bool),
    **dict.fromkeys(("split", "rsplit", "partition", "rpartition", "splitlines"), list),
    "join": str,
}
#: The builtins called: what they make of one sequence, or of one simple value.
_MAKERS = (tuple, list, frozenset, set)
#: Not ``str`` of ``bytes``: under ``python -b`` it warns, and a warning takes the frame's line.
_CONVERTERS = {int: SIMPLE[:4], float: SIMPLE[:4], str: SIMPLE[:5]}
#: Instructions that only move the stack or mark places.
_MOVES = frozenset({"NOP", "RESUME", "CACHE", "EXTENDED_ARG", "PRECALL"})
NULL = ("null",)
#: Python 3.12+: ``LOAD_ATTR`` with its low bit set loads a method (``LOAD_METHOD`` before).
NEW_ATTR = sys.version_info >= (3, 12)


class Refused(Exception):
    """An instruction or operand this module does not follow."""


def _kind(value):
    """What is followed of a value read from a name or an attribute."""
    if type(value) in SIMPLE:
        return ("value", value)
    if type(value) is tuple and all(type(x) in SIMPLE for x in value):
        return ("value", value)
    if any(value is f for f in (*_MAKERS, *_CONVERTERS, len)):
        return ("builtin", value)
    import types

    if type(value) is types.ModuleType:
        return ("module", value)
    raise Refused(repr(type(value)))


def _elements(kind, namespace, vouched):
    """The exact type of the items of an iterable ``kind`` (None: no items), running a
    generator expression's code abstractly where it is consumed."""
    tag = kind[0]
    if tag == "value" and type(kind[1]) in (str, tuple):
        types_ = {type(x) for x in kind[1]} if type(kind[1]) is tuple else {str}
    elif tag in ("seq", "iter"):
        types_ = {kind[1]} if kind[1] is not None else set()
    elif tag == "typed" and kind[1] is str:
        types_ = {str}
    elif tag == "gen":
        types_ = {_genexpr(kind[1], kind[2], namespace, vouched)}
    else:
        raise Refused(tag)
    if len(types_) > 1:
        raise Refused("mixed")
    return next(iter(types_), None)


def _type_of(kind):
    if kind[0] == "value" and type(kind[1]) in SIMPLE:
        return type(kind[1])
    if kind[0] == "typed":
        return kind[1]
    raise Refused(kind[0])


def _call(callee, args, namespace, vouched):
    """What a call of ``callee`` makes of ``args``, when it runs C code only."""
    tag = callee[0]
    if tag == "method":
        if callee[1] == "join" and len(args) == 1:
            if _elements(args[0], namespace, vouched) not in (str, None):
                raise Refused("join")
            return ("typed", str)
        if not all(_type_of(a) in (str, int) for a in args):
            raise Refused(callee[1])
        made = _STR_METHODS[callee[1]]
        return ("seq", str) if made is list else ("typed", made)
    if tag == "genfunc" and len(args) == 1 and args[0][0] == "iter":
        return ("gen", callee[1], args[0][1])
    if tag != "builtin" or len(args) != 1:
        raise Refused(tag)
    function = callee[1]
    if function in _MAKERS:
        return ("seq", _elements(args[0], namespace, vouched))
    if function is len:
        _elements(args[0], namespace, vouched)
        return ("typed", int)
    if _type_of(args[0]) not in _CONVERTERS.get(function, ()):
        raise Refused(function.__name__)
    return ("typed", function)


def _attribute(owner, name, method):
    """``owner.name``: a plain module's attribute, or a method of a ``str``."""
    if owner[0] == "module":
        try:
            found = _kind(_module_attribute(owner[1], name))
        except LookupError:
            raise Refused(name) from None
        return [NULL, found] if method else [found]
    if name in _STR_METHODS and _type_of(owner) is str and method:
        return [NULL, ("method", name)]
    raise Refused(name)


def _step(i, stack, load, namespace, vouched):
    """Follows one instruction of a statement over ``stack``; ``load``: a name's kind."""
    op = i.opname
    if op in _MOVES:
        return
    if op == "PUSH_NULL":
        stack.append(NULL)
    elif op == "LOAD_CONST":
        if hasattr(i.argval, "co_code"):
            stack.append(("code", i.argval))
        else:
            stack.append(_kind(i.argval))
    elif op in ("LOAD_NAME", "LOAD_GLOBAL"):
        if op == "LOAD_GLOBAL" and i.arg & 1:
            stack.append(NULL)
        stack.append(load(i.argval))
    elif op in ("LOAD_ATTR", "LOAD_METHOD"):
        method = op == "LOAD_METHOD" or (op == "LOAD_ATTR" and NEW_ATTR and bool(i.arg & 1))
        stack.extend(_attribute(stack.pop(), i.argval, method))
    elif op == "MAKE_FUNCTION":
        code = stack.pop()
        if i.arg or code[0] != "code" or code[1].co_name != "<genexpr>" or code[1].co_freevars:
            raise Refused("function")
        stack.append(("genfunc", code[1]))
    elif op == "GET_ITER":
        kind = stack.pop()
        stack.append(kind if kind[0] == "gen" else ("iter", _elements(kind, namespace, vouched)))
    elif op == "CALL":
        args = [stack.pop() for _ in range(i.arg)][::-1]
        upper, lower = stack.pop(), stack.pop()
        if lower is NULL:
            callee = upper
        elif upper is NULL:
            callee = lower
        else:
            callee, args = lower, [upper, *args]
        stack.append(_call(callee, args, namespace, vouched))
    elif op in ("BUILD_TUPLE", "BUILD_LIST"):
        items = [stack.pop() for _ in range(i.arg)]
        found = {_type_of(x) for x in items}
        if len(found) > 1:
            raise Refused("mixed")
        stack.append(("seq", next(iter(found), None)))
    else:
        raise Refused(op)


#: The instructions of a generator expression before and after its loop: the generator
#: made, the loop's end, ``StopIteration`` made a ``RuntimeError`` (C code).
_GENEXPR_FRAME = frozenset(
    {"RETURN_GENERATOR", "POP_TOP", "END_FOR", "RETURN_CONST", "LOAD_CONST", "RETURN_VALUE"}
    | {"CALL_INTRINSIC_1", "RERAISE", "LOAD_FAST"}
    | _MOVES
)


def _genexpr(code, item, namespace, vouched):
    """Follows a generator expression of the module over items of type ``item`` (None:
    no items): the type of what it yields. Only ``(f(x) for x in it)``, one loop and no
    condition; its offsets are then vouched for."""
    ins = instructions(code)
    ops = [i.opname for i in ins]
    if ops.count("FOR_ITER") != 1 or ops.count("YIELD_VALUE") != 1:
        raise Refused("genexpr")
    if [op for op in ops if "JUMP" in op] != ["JUMP_BACKWARD"]:
        raise Refused("genexpr")
    start, end = ops.index("FOR_ITER"), ops.index("JUMP_BACKWARD")
    if not all(op in _GENEXPR_FRAME for op in ops[:start] + ops[end + 1 :]):
        raise Refused("genexpr")
    yielded = None
    if item is not None:
        local, stack = {}, [("iter", item), ("typed", item)]

        def load(name):
            return _builtin(name, namespace)

        for i in ins[start + 1 : end]:
            op = i.opname
            if op == "STORE_FAST":
                local[i.argval] = stack.pop()
            elif op in ("LOAD_FAST", "LOAD_FAST_CHECK"):
                stack.append(local[i.argval])
            elif op == "LOAD_FAST_LOAD_FAST":
                stack.extend(local[name] for name in i.argval)
            elif op == "STORE_FAST_LOAD_FAST":
                local[i.argval[0]] = stack.pop()
                stack.append(local[i.argval[1]])
            elif op == "YIELD_VALUE":
                yielded = _type_of(stack.pop())
                stack.append(("value", None))
            elif op == "POP_TOP":
                stack.pop()
            else:
                _step(i, stack, load, namespace, vouched)
        if len(stack) != 1:
            raise Refused("stack")
    vouched[id(code)] = (code, [i.offset for i in ins])
    return yielded


def _builtin(name, namespace):
    """A builtin the module's namespace does not hide."""
    if name in namespace or name not in builtins.__dict__:
        raise Refused(name)
    return _kind(builtins.__dict__[name])


def quiet_offsets(module_code, namespace):
    """Run side: ``[(code, [offset, ...])]`` for a module body that ran and was made into
    the module whose namespace is ``namespace``: the instructions of its statements whose
    calls ran C code only, and the offsets of the generator expressions they ran."""
    ins = instructions(module_code)
    if any(i.opname == "IMPORT_STAR" for i in ins):
        return []
    stores, first = {}, {}
    for i in ins:
        if i.opname in ("STORE_NAME", "DELETE_NAME", "STORE_GLOBAL", "DELETE_GLOBAL"):
            stores[i.argval] = stores.get(i.argval, 0) + 1
            first.setdefault(i.argval, i.offset)
    loops = [
        (i.argval, i.offset)
        for i in ins
        if "JUMP" in i.opname and isinstance(i.argval, int) and i.argval <= i.offset
    ]
    dropping = _dropping(ins)
    loud = {i.offset for n, i in enumerate(ins) if i.opname not in _QUIET or _hashing(ins, n)}
    loud |= set(dropping)
    module, vouched, start = [], {}, 0
    for end, i in enumerate(ins):
        if i.opname not in ("STORE_NAME", "POP_TOP"):
            continue
        part, start = ins[start : end + 1], end + 1
        mine = [x.offset for x in part if x.offset in loud]
        if not mine or i.offset in dropping:
            continue

        def load(name, at=part[0].offset):
            if name in _PRESET:
                raise Refused(name)
            if name not in stores:
                return _builtin(name, namespace)
            where = first[name]
            if stores[name] != 1 or where > at or any(a <= where <= b for a, b in loops):
                raise Refused(name)
            return _kind(namespace[name])

        found, stack = {}, []
        try:
            for x in part[:-1]:
                _step(x, stack, load, namespace, found)
            stack.pop()
        except (Refused, LookupError, TypeError, ValueError, AttributeError):
            continue
        if stack:
            continue
        module.extend(mine)
        vouched.update(found)
    if not module:
        return []
    return [(module_code, module), *vouched.values()]
