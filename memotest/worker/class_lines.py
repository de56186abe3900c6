"""Class statements no Python code but their body's could observe (run side).

A class statement of a module body runs code while the module's frame is at its line:
the class body, and whatever making the class calls (a metaclass, a base's
``__init_subclass__``, ``__set_name__``, ``__mro_entries__``, the bases' expressions, a
decorator). A frame read by any of it (``sys._getframe(1)``, a warning with
``stacklevel=2``, logging) sees that line. A run can tell, once the class is made, that
none of that was Python code: then the statement's line, and those of its body, are no
more observable than those of a constant bound to a name (:func:`quiet_offsets`). The
record keeps the offsets the run vouched for (``memotest/inputs/code.py``), and the
digests leave their lines out (``codes._loud_lines``); the same bytecode, compiled from
an edited file, runs the same way.

Out of reach, as for every quiet instruction: a garbage collection or a weakref
callback running Python code in the middle, and a name the class body or module
rebound or deleted after the class was made (the names are resolved once it is).

Standard library only, Python 3.10 syntax: it runs in the worker
(``memotest/worker/__init__.py``).
"""

import sys

from .codes import _QUIET, QUIET_CLASS, _hashing, instructions, qualname

#: What a class statement's bases and keywords may be made of: names and attributes.
_EXPRESSION = frozenset({"LOAD_NAME", "LOAD_ATTR", "KW_NAMES", "PRECALL", "NOP", "EXTENDED_ARG"})
#: A property's methods that make another property (C code).
_PROPERTY_METHODS = frozenset({"setter", "getter", "deleter"})


def class_statements(module_code):
    """The class statements of a module body, decorator-free, whose bases and keywords are
    names and attributes: ``[(body code, [instructions], [argument instructions], name)]``."""
    ins = instructions(module_code)
    out = []
    for n, i in enumerate(ins):
        if i.opname != "LOAD_BUILD_CLASS":
            continue
        start = n - 1 if n and ins[n - 1].opname == "PUSH_NULL" else n
        j, body = n + 1, None
        if j < len(ins) and ins[j].opname == "PUSH_NULL":  # Python 3.13: after it
            j += 1
        while j < len(ins) and ins[j].opname == "LOAD_CONST":
            body = ins[j].argval if hasattr(ins[j].argval, "co_code") else body
            j += 1
        if body is None or j >= len(ins) or ins[j].opname != "MAKE_FUNCTION" or ins[j].arg:
            continue
        j += 1
        if j >= len(ins) or ins[j].opname != "LOAD_CONST":  # the class's name
            continue
        args_from = j = j + 1
        while j < len(ins) and ins[j].opname in _EXPRESSION and ins[j].opname != "PRECALL":
            j += 1
        if (
            j + 1 < len(ins)
            and ins[j].opname == "LOAD_CONST"
            and type(ins[j].argval) is tuple
            and ins[j + 1].opname == "CALL_KW"
        ):  # Python 3.13: the keywords' names, before CALL_KW
            j += 1
        args = ins[args_from:j]
        while j < len(ins) and ins[j].opname == "PRECALL":
            j += 1
        if j + 1 >= len(ins) or not ins[j].opname.startswith("CALL"):
            continue
        if ins[j + 1].opname != "STORE_NAME":  # a decorator's call comes first
            continue
        out.append((body, ins[start : j + 2], args, ins[j + 1].argval))
    return out


def _own(cls):
    return type.__dict__["__dict__"].__get__(cls)


def _mro(cls):
    return type.__dict__["__mro__"].__get__(cls)


def _plain_value(value, metas):
    """Whether making a class with ``value`` in its namespace, and ``abc``'s look for
    ``__isabstractmethod__`` in it, runs no Python code."""
    import types

    kind = type(value)
    if kind in metas:
        return True
    return kind in (
        types.FunctionType,
        property,
        staticmethod,
        classmethod,
        str,
        int,
        float,
        bool,
        type(None),
        tuple,
        list,
        dict,
        set,
        frozenset,
        bytes,
        types.GetSetDescriptorType,
        types.MemberDescriptorType,
    ) or (kind.__module__ == "_abc" and kind.__name__ == "_abc_data")


def _module_attribute(obj, name):
    """``obj.name`` when ``obj`` is a plain module that has it (no ``__getattr__``: no
    Python code gets it); raises LookupError otherwise."""
    import types

    if type(obj) is not types.ModuleType:
        raise LookupError(name)
    space = obj.__dict__
    if "__getattr__" in space or name not in space:
        raise LookupError(name)
    return space[name]


def _class_is_plain(cls, metas):
    """Whether making ``cls`` ran no Python code but its body (and ``abc``'s own)."""
    if type(cls) not in metas:
        return False
    own = _own(cls)
    if "__orig_bases__" in own:  # a base's __mro_entries__ ran
        return False
    for base in _mro(cls)[1:]:
        if base is not object and "__init_subclass__" in _own(base):
            return False
    if not all(_plain_value(v, metas) for v in own.values()):
        return False
    for base in type.__dict__["__bases__"].__get__(cls):  # abc looks these names up in cls
        names = _abstract_names(base)
        if names is None:
            return False
        for name in names:
            found = next((_own(b)[name] for b in _mro(cls) if name in _own(b)), None)
            if not _plain_value(found, metas):
                return False
    return True


def _abstract_names(base):
    """The names ``abc`` finds in ``base.__abstractmethods__`` (its own, by ``type``'s
    descriptor), or None when they are not a set of strings. ``type``'s own is that
    descriptor, which finds none there: a metaclass's base has none."""
    if base is type:
        return ()
    names = _own(base).get("__abstractmethods__", ())
    if type(names) not in (frozenset, set, tuple) or any(type(n) is not str for n in names):
        return None
    return names


def _of_constants(part, instruction):
    """Whether ``instruction`` fills a list or set with a constant's items (``[1, 2, 3]``
    compiles to ``BUILD_LIST``, ``LOAD_CONST (1, 2, 3)``, ``LIST_EXTEND``)."""
    n = part.index(instruction)
    if instruction.opname == "BUILD_SET":
        return instruction.arg == 0 and n + 2 < len(part) and _of_constants(part, part[n + 2])
    if instruction.opname not in ("LIST_EXTEND", "SET_UPDATE") or n == 0:
        return False
    const = part[n - 1]
    return const.opname == "LOAD_CONST" and type(const.argval) in (tuple, frozenset)


def _body_offsets(body, cls, namespace, metas):
    """The offsets of the instructions of a class body, beyond :data:`QUIET_CLASS`, that
    ran no Python code (decorators ``property``, ``staticmethod``, ``classmethod``, a
    property's ``setter``, ``abc.abstractmethod`` on a function made there), or None when
    another one is there."""
    import builtins

    abc = sys.modules.get("abc")
    own = _own(cls)
    makers = {id(property): "p", id(staticmethod): "s", id(classmethod): "c"}
    abstract = getattr(abc, "abstractmethod", None)
    if abstract is not None and abstract.__code__.co_filename in ("<frozen abc>", abc.__file__):
        makers[id(abstract)] = "f"

    def resolve(name):
        for space in (own, namespace, builtins.__dict__):
            if name in space:
                return space[name]
        raise LookupError(name)

    ins = instructions(body)
    if any(_hashing(ins, n) for n in range(len(ins))):
        return None  # a key's __hash__ or __eq__, a value freed: code at the statement's line
    out, start = [], 0
    for end, i in enumerate(ins):
        if i.opname not in ("STORE_NAME", "RETURN_VALUE", "RETURN_CONST"):
            continue
        part, start = ins[start : end + 1], end + 1
        loud = [x for x in part if x.opname not in QUIET_CLASS]
        constants = [x for x in loud if _of_constants(part, x)]
        out.extend(x.offset for x in constants)  # [1, 2, 3], {1, 2, 3}: C code only
        loud = [x for x in loud if x not in constants]
        if not loud:
            continue
        if any(x.opname in ("POP_TOP", "PUSH_NULL") for x in part):
            return None  # an expression statement, a call: not a decorated def alone
        k, j = 0, len(part) - 2  # the decorators' calls, between MAKE_FUNCTION and STORE
        while j > 0 and part[j].opname.startswith("CALL") and part[j].arg == 0:
            j -= 2 if part[j - 1].opname == "PRECALL" else 1
            k += 1
        if i.opname != "STORE_NAME" or not k or part[j].opname != "MAKE_FUNCTION":
            return None
        try:
            callees, n = [], 0
            for _ in range(k):
                if part[n].opname != "LOAD_NAME":
                    return None
                value, n = resolve(part[n].argval), n + 1
                while part[n].opname == "LOAD_ATTR":
                    name = part[n].argval
                    if type(value) is property and name in _PROPERTY_METHODS:
                        value = property  # a property's setter makes a property, in C
                    else:
                        value = _module_attribute(value, name)
                    n += 1
                callees.append(value)
        except LookupError:
            return None
        if any(x.opname not in QUIET_CLASS for x in part[n:j]):
            return None  # the function's defaults, annotations: quiet ones only
        made = "f"  # the function, then each decorator's result, innermost first
        for callee in reversed(callees):
            kind = makers.get(id(callee))
            if kind is None or (made != "f" and kind != "p"):
                return None
            made = kind
        out.extend(x.offset for x in loud)
    return out


def _statement_offsets(statement, cls, namespace, consts):
    """The offsets of a class statement's instructions that can run Python code, when
    none did (its bases and ``metaclass`` are names and plain modules' attributes, and
    evaluate to what ``cls`` has); else None."""
    import builtins

    _body, part, args, _name = statement
    values, keywords = [], ()
    try:
        for i in args:
            if i.opname == "LOAD_NAME":
                space = namespace if i.argval in namespace else builtins.__dict__
                values.append(space[i.argval])
            elif i.opname == "LOAD_ATTR":
                values.append(_module_attribute(values.pop(), i.argval))
            elif i.opname == "KW_NAMES":
                keywords = consts[i.arg]
            elif i.opname == "LOAD_CONST":  # Python 3.13: CALL_KW's names
                keywords = i.argval
    except (LookupError, IndexError):
        return None
    if keywords and tuple(keywords) != ("metaclass",):
        return None
    if keywords and values.pop() is not type(cls):
        return None
    bases = type.__dict__["__bases__"].__get__(cls)
    if values and len(values) != len(bases):
        return None
    if any(a is not b for a, b in zip(values, bases, strict=False)):
        return None
    if not values and bases != (object,):
        return None
    return [i.offset for i in part if i.opname not in _QUIET]


def _standard_abc(abc):
    """Whether ``abc.ABCMeta`` makes classes with the standard library's own code (which
    reads no frame), not a ``__new__`` someone put in its place."""
    try:
        new = _own(abc.ABCMeta)["__new__"]
        code = getattr(new, "__func__", new).__code__
        return code.co_filename in ("<frozen abc>", abc.__file__, "<frozen _py_abc>")
    except Exception:
        return False


def quiet_offsets(module_code, namespace):
    """Run side: ``{code: [offset, ...]}`` for a module body that ran and was made into the
    module whose namespace is ``namespace``: for the module's code, the instructions of
    its class statements during which no Python code ran but the class body; for each
    such class body, those of its instructions beyond :data:`QUIET_CLASS` (which hold
    for a dict namespace) that ran none either. Reads ``__code__`` of ``abc``'s
    ``abstractmethod``: the caller keeps that from counting as run."""
    import builtins
    import types

    if type(builtins.__build_class__) is not types.BuiltinFunctionType:
        return {}
    abc = sys.modules.get("abc")
    metas = (type, abc.ABCMeta) if _standard_abc(abc) else (type,)
    stored = {}
    for i in instructions(module_code):
        if i.opname in ("STORE_NAME", "DELETE_NAME", "STORE_GLOBAL", "DELETE_GLOBAL"):
            stored[i.argval] = stored.get(i.argval, 0) + 1
    out, mine = {}, []
    for statement in class_statements(module_code):
        body, _part, _args, name = statement
        cls = namespace.get(name)
        if stored.get(name) != 1 or not _class_is_plain(cls, metas):
            continue
        if type.__dict__["__qualname__"].__get__(cls) != qualname(body):
            continue
        offsets = _statement_offsets(statement, cls, namespace, module_code.co_consts)
        inner = _body_offsets(body, cls, namespace, metas) if offsets is not None else None
        if inner is None:
            continue
        mine.extend(offsets)
        out[body] = inner
    if mine:
        out[module_code] = mine
    return out
