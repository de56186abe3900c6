"""The digests of code objects: what of a Python source file a run's result can depend on.

A run forked from a warm worker notes every code object its process evaluated
(``memotest/_executed``). For a ``.py`` file that only the import system read, and only in
that process, what the run's result can depend on is not every byte of the file but:

* the bodies that ran when it was imported, module and classes (their bytecode, names
  and constants: default values, decorators, annotations, class attributes), and
* every function of it that ran, whole, line numbers included (a traceback, a warning or
  a log record shows them),
* and of every function that did not run, what can be seen without running it: its name,
  qualified name, argument names and counts, flags and docstring (``inspect.signature``,
  ``click``'s help texts), and its default values, unless the run vouched that nothing
  saw them (``defaults_seen.py``: then only how many there are, :func:`default_sites`).

Line numbers of module and class bodies count where a program can see them: a frame's
line is read (``sys._getframe().f_lineno``, ``inspect.currentframe()``, logging's
``%(lineno)d``, a warning) only while Python code runs, so the digest of a body holds the
line of every instruction during which Python code can run (a call, an import, a class
statement, an operator; every instruction of a class body, whose namespace may be any
mapping), not those of the instructions that only bind a name (``def`` without a
decorator, a constant). So an edit inside one function, or a comment, leaves every run
that did not execute that function cached while no call, import, class or decorator of
a body comes after it; otherwise the runs that imported the file run again. A class
statement whose making ran no Python code but its body's, and whose body ran none but
``property``'s and its kin's, is no more observable than a constant: the run vouches for
the offsets of those instructions (``class_lines.py``), and their lines do not count; so
does a statement whose calls are C functions on built-in values, with the generator
expression it runs (``call_lines.py``).

Code objects are named by their path in the file's tree (``Outer.method#0``: the
qualified name and its occurrence in a depth-first walk). A fingerprint is the map of
those names to digests for the code objects that ran; it holds while compiling the file
anew gives the same digests for each (``memotest/inputs/code.py`` keeps and checks it).

The worker reports each code object it ran by :func:`check`; memotest compiles the file
and takes the same digests: this module runs on both sides, so it is of the standard
library only, in Python 3.10 syntax (see ``memotest/worker/__init__.py``).
"""

import dis
import hashlib
import sys

from .bytecode import instructions, lines
from .first_line import FIRST_LINE, first_line_const

CO_OPTIMIZED = 0x1
CO_VARARGS = 0x4
CO_VARKEYWORDS = 0x8
#: Generators, coroutines, async generators: a call makes a frame without running it.
_SUSPENDS = 0x20 | 0x80 | 0x100 | 0x200
COMPREHENSIONS = frozenset({"<listcomp>", "<dictcomp>", "<setcomp>", "<genexpr>"})
#: The instructions of a module body during which no Python code can run (the module's
#: namespace is a dict): while one runs, nothing can read the frame's line number. Two of
#: them only in some places (:func:`_dropping`, :func:`_hashing`): ``STORE_NAME`` frees
#: the value a name had (its ``__del__``, or C code that warns, like an unclosed file's,
#: sees the frame), and ``BUILD_MAP`` hashes its keys.
_QUIET = frozenset(
    {
        "NOP",
        "RESUME",
        "CACHE",
        "LOAD_CONST",
        "MAKE_FUNCTION",
        "SET_FUNCTION_ATTRIBUTE",
        "STORE_NAME",
        "LOAD_NAME",
        "PUSH_NULL",
        "KW_NAMES",
        "COPY",
        "SWAP",
        "BUILD_TUPLE",
        "BUILD_MAP",  # with constant keys: _hashing
        "BUILD_CONST_KEY_MAP",
        "POP_TOP",
        "EXTENDED_ARG",
        "RETURN_VALUE",
        "RETURN_CONST",
    }
)


#: The instructions of a class body quiet when its namespace is a dict (``type``'s).
QUIET_CLASS = _QUIET | {
    "MAKE_CELL",
    "COPY_FREE_VARS",
    "LOAD_CLOSURE",
    "LOAD_CLASSDEREF",
    "BUILD_LIST",
}


#: Names the import system binds before a module's body runs: binding one again frees a
#: value the body did not make.
_PRESET = frozenset(
    {"__name__", "__loader__", "__package__", "__spec__", "__path__", "__file__", "__cached__"}
    | {"__builtins__"}
)
_STORES = ("STORE_NAME", "DELETE_NAME", "STORE_GLOBAL", "DELETE_GLOBAL")


def _dropping(ins):
    """The offsets of a module body's ``STORE_NAME`` instructions that can free a value:
    a name bound more than once or deleted, bound in a loop, bound after ``import *``,
    or bound by the import system before. Freeing a value runs its ``__del__`` or a
    weakref's callback with the module's frame current, and C code that warns (an
    unclosed file's ``ResourceWarning``) takes that frame's line.
    ``tests/test_codelevel_quiet.py`` (``rebind_*``)."""
    stores = {}
    for i in ins:
        if i.opname in _STORES:
            stores[i.argval] = stores.get(i.argval, 0) + 1
    loops = [
        (i.argval, i.offset)
        for i in ins
        if "JUMP" in i.opname and isinstance(i.argval, int) and i.argval <= i.offset
    ]
    star = min((i.offset for i in ins if i.opname == "IMPORT_STAR"), default=None)
    return {
        i.offset
        for i in ins
        if i.opname == "STORE_NAME"
        and (
            stores[i.argval] != 1
            or i.argval in _PRESET
            or (star is not None and i.offset > star)
            or any(start <= i.offset <= end for start, end in loops)
        )
    }


def _hashing(ins, n):
    """Whether ``ins[n]`` is a ``BUILD_MAP`` that can run code: it hashes and compares its
    keys (``__hash__``, ``__eq__`` of a key that is not a constant). Constant keys are
    hashed and compared in C; a value freed by an equal key was made by an instruction
    of the same display, on its line or after, which counts if it can run code.
    ``tests/test_codelevel_quiet.py`` (``dict_*``, ``class_dict_hash``)."""
    i = ins[n]
    if i.opname != "BUILD_MAP" or not i.arg:
        return False
    before = [x for x in ins[:n] if x.opname != "EXTENDED_ARG"]
    if 2 * i.arg > len(before):
        return True
    pushed = before[-2 * i.arg :]
    return any(x.opname not in ("LOAD_CONST", "LOAD_NAME") for x in pushed) or any(
        x.opname != "LOAD_CONST" for x in pushed[0::2]
    )


def loud_instructions(code, silent):
    """The instructions of ``code`` during which code can run: those not in ``silent``
    and, of those in it, the ``STORE_NAME`` of a module body that can free a value and
    the dict displays that can hash or free one."""
    ins = instructions(code)
    dropping = _dropping(ins) if code.co_name == "<module>" else ()
    return [
        i
        for n, i in enumerate(ins)
        if i.opname not in silent or i.offset in dropping or _hashing(ins, n)
    ]


def _loud_lines(code, quiet=None):
    """The line of every instruction of a body during which Python code can run (a call,
    an import, a class statement, an operator): a frame read then (``sys._getframe``,
    ``logging``'s ``%(lineno)d``, a warning) sees it. A class body's namespace may be
    any mapping (``__prepare__``), so all its instructions count, unless the run
    vouched for it (``quiet``, ``class_lines.quiet_offsets``: the offsets of the
    instructions that ran no Python code; for a class body, its namespace was a dict)."""
    module = code.co_name == "<module>"
    silent = _QUIET if module else QUIET_CLASS if quiet is not None else frozenset()
    skip = frozenset(quiet or ())
    line = lines(code)
    return [
        (i.offset, line(i.offset)) for i in loud_instructions(code, silent) if i.offset not in skip
    ]


def qualname(code):
    """The qualified name of a code object (its name before Python 3.11)."""
    return getattr(code, "co_qualname", code.co_name)


def _const(obj, nested):
    cls = type(obj)
    if cls is tuple:
        return "(" + ",".join(_const(x, nested) for x in obj) + ")"
    if cls is frozenset:
        return "{" + ",".join(sorted(_const(x, nested) for x in obj)) + "}"
    if hasattr(obj, "co_code"):
        return nested(obj)
    return cls.__name__ + ":" + repr(obj)


def interface(code):
    """What can be seen of a function without running it."""
    nargs = code.co_argcount + code.co_kwonlyargcount
    nargs += bool(code.co_flags & CO_VARARGS) + bool(code.co_flags & CO_VARKEYWORDS)
    doc = None
    if code.co_flags & CO_OPTIMIZED and code.co_consts and type(code.co_consts[0]) is str:
        doc = code.co_consts[0]
    return (
        "<code "
        + repr(
            (
                code.co_name,
                qualname(code),
                code.co_argcount,
                code.co_posonlyargcount,
                code.co_kwonlyargcount,
                code.co_flags,
                code.co_varnames[:nargs],
                code.co_freevars,
                doc,
            )
        )
        + ">"
    )


def _operand(ins, end):
    """The start of the instructions before ``ins[end]`` that push one operand of a
    function being made, when they are of a form :func:`default_sites` reads: a constant,
    or a tuple or a constant-keyed dict of constants and names; else None."""
    if end < 0:
        return None
    i = ins[end]
    if i.opname == "LOAD_CONST":
        return end
    n = i.arg + 1 if i.opname == "BUILD_CONST_KEY_MAP" else i.arg  # the keys' tuple first
    if i.opname not in ("BUILD_TUPLE", "BUILD_CONST_KEY_MAP") or end < n:
        return None
    if any(x.opname not in ("LOAD_CONST", "LOAD_NAME") for x in ins[end - n : end]):
        return None
    return end - n


def default_sites(code):
    """The ``def`` statements of a body whose default values are constants:
    ``[(function's code, {offset: shape})]``, the offsets of the instructions that load
    those values (a tuple of positional defaults, each keyword-only default) and what of
    each a call still sees without the function running (how many positional defaults
    there are: a call that binds no longer raises ``TypeError``). Other defaults (names,
    expressions), a closure, and a generator or coroutine function leave the statement
    out."""
    ins = [i for i in instructions(code) if i.opname != "EXTENDED_ARG"]
    out = []
    for m, i in enumerate(ins):
        if i.opname != "MAKE_FUNCTION":
            continue
        c = (
            m - 2
            if m > 1 and ins[m - 1].opname == "LOAD_CONST" and type(ins[m - 1].argval) is str
            else m - 1
        )
        if c < 0 or ins[c].opname != "LOAD_CONST" or not hasattr(ins[c].argval, "co_code"):
            continue
        if ins[c].argval.co_flags & _SUSPENDS:
            continue  # a call binds the defaults into a frame (gi_frame) before it runs
        flags = i.arg or 0
        for after in ins[m + 1 :]:  # Python 3.13: one instruction per operand
            if after.opname != "SET_FUNCTION_ATTRIBUTE":
                break
            flags |= after.arg
        if flags & 0x08 or not flags & 0x03:
            continue
        shapes, end = {}, c - 1
        if flags & 0x04:  # the annotations: skipped
            start = _operand(ins, end)
            if start is None:
                continue
            end = start - 1
        if flags & 0x02:
            start = _operand(ins, end)
            if start is None or ins[end].opname != "BUILD_CONST_KEY_MAP":
                continue
            values = ins[start : end - 1]
            shapes.update((x.offset, "kwdefault") for x in values if x.opname == "LOAD_CONST")
            end = start - 1
        if flags & 0x01:
            start = _operand(ins, end)
            if start is None:
                continue
            if ins[end].opname == "LOAD_CONST" and type(ins[end].argval) is tuple:
                shapes[ins[end].offset] = f"defaults:{len(ins[end].argval)}"
        if shapes:
            out.append((ins[c].argval, shapes))
    return out


def _listing(code, unseen, first=None):
    """The instructions of a body, each constant by its value but the default values a
    run vouched no one saw (``unseen``: :func:`default_sites` offsets), by their shape,
    and the class body's first line (``first``, its index in ``co_consts``)."""
    shapes = {}
    for _code, sites in default_sites(code):
        shapes.update(sites)
    out = []
    for i in instructions(code):
        if i.opname == "EXTENDED_ARG":
            continue
        if i.offset in unseen and i.offset in shapes:
            out.append(i.opname + ":" + shapes[i.offset])
        elif first is not None and i.opcode in dis.hasconst and i.arg == first:
            out.append(i.opname + ":<first line>")
        elif i.opcode in dis.hasconst:
            out.append(i.opname + ":" + _const(i.argval, interface))
        else:
            out.append(i.opname + ":" + repr(i.arg))
    return "\n".join(out)


def digest(code, lines, quiet=None):
    """The digest of one code object: nested code objects count by their interface only;
    ``lines`` says whether its line numbers count (``quiet``: see :func:`_loud_lines`;
    its negative entries, ``-1 - offset``, are default values no one saw:
    :func:`default_sites`, ``code_watch.unseen_defaults``)."""
    unseen = {-1 - x for x in quiet or () if x < 0}
    # A class body whose instructions the run vouched for (``class_lines``): its first
    # line, a constant since Python 3.13, is a line number as those its digest leaves out
    # (read only by inspecting the class, as a function's ``co_firstlineno``).
    first = None
    consts = code.co_consts
    if not lines and quiet is not None and code.co_name != "<module>":
        first = first_line_const(code)
        if first is not None:
            consts = (*consts[:first], FIRST_LINE, *consts[first + 1 :])
    parts = [
        interface(code),
        code.co_code.hex() if not unseen else _listing(code, unseen, first),
        repr(code.co_names),
        repr(code.co_varnames),
        repr(code.co_cellvars),
        repr(code.co_stacksize),
        getattr(code, "co_exceptiontable", b"").hex(),
        _const(consts, interface) if not unseen else "",
    ]
    if lines:
        parts.append(repr(code.co_firstlineno))
        table = getattr(code, "co_linetable", None)
        parts.append(table.hex() if table is not None else code.co_lnotab.hex())
    else:
        parts.append(repr(_loud_lines(code, quiet)))
    return hashlib.blake2b(
        "\0".join(parts).encode("utf-8", "surrogatepass"), digest_size=16
    ).hexdigest()


def check(code):
    """What a run reports of a code object it executed, to tell it apart from any other
    code object with its name and first line: its digest with line numbers."""
    return digest(code, True)


def tree(module_code):
    """``{key: (code, body)}`` for every code object of a compiled module, where ``body``
    says its line numbers do not count (a module or class body, or a comprehension run
    by one)."""
    out = {}
    seen = {}

    def walk(code, parent_body):
        name = qualname(code)
        n = seen.get(name, 0)
        seen[name] = n + 1
        body = not code.co_flags & CO_OPTIMIZED or (parent_body and code.co_name in COMPREHENSIONS)
        out[name + "#" + str(n)] = (code, body)
        for const in code.co_consts:
            if hasattr(const, "co_code"):
                walk(const, body)

    walk(module_code, True)
    return out


def compile_tree(source, path):
    """:func:`tree` of a source file's bytes as the import system would compile them
    (without ``-O``); raises SyntaxError, ValueError."""
    return tree(compile(source, path, "exec", dont_inherit=True, optimize=0))


def cache_tag():
    """The compiler the digests are taken with: they compare only under the same one."""
    return sys.implementation.cache_tag
