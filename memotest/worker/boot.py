"""Makes the worker's modules in the target's interpreter, then starts the worker.

memotest runs ``PYTHON -c <this file's text> CONFIG LISTINGS NAME PATH SOURCE ...``: this
file makes each ``NAME`` the module ``_memotest_worker.NAME`` of a package of its own
(never a name the target's code could import), compiled from ``SOURCE`` under its real
``PATH``, in the order given (a module comes after those it imports), then runs the
worker (``serve.main``) and, in each child it forks, the run (``child.become``).

memotest may pass the modules compiled (``marshal``, NUL bytes escaped): then ``CODE``
follows each ``SOURCE`` and a ``compiled:MAGIC:OPTIMIZE`` argument comes before the first
``NAME``; the code is used when this interpreter's magic number and ``-O`` level are those,
else each module is compiled from its source as without it. Either way the module's code
is that of ``compile(SOURCE, PATH)`` (``memotest/tracer/warm/command.py``).

A plain process loads some of the modules the same way, from this file's text, to watch
its listings (``listings.py``): :func:`start_watch`, called by the ``sitecustomize.py`` and
``memotest_walk.py`` of ``plugins/memotest_pytest/walk_path/`` (a plain pytest process)
and by ``plugins/memotest_rules/launch_path/memotest_py_test.py`` (a ``py_test``).

The interpreter has only ``sys`` and what its start-up imported when this runs; the
modules' top-level imports are those the watchers need: what is imported before they
start is taken to have been looked for in every folder listed until then (``listings``).
"""

import sys

PACKAGE = "_memotest_worker"


def load(name, path, source, code=None):
    """Makes and runs the module ``PACKAGE.name`` from ``source`` (the file at ``path``),
    or from ``code``, ``source`` compiled, when given."""
    module = type(sys)(PACKAGE + "." + name)
    module.__file__ = path
    module.__package__ = PACKAGE
    sys.modules[module.__name__] = module
    setattr(sys.modules[PACKAGE], name, module)
    if code is None:
        code = compile(source, path, "exec", dont_inherit=True)
    exec(code, module.__dict__)
    return module


def load_all(modules):
    """Makes the package, then each module of ``modules`` (``NAME PATH SOURCE ...``, flat)."""
    package = type(sys)(PACKAGE)
    package.__path__ = []
    package.__package__ = PACKAGE
    sys.modules[PACKAGE] = package
    for i in range(0, len(modules), 3):
        load(*modules[i : i + 3])


def start_watch(watch):
    """In a plain process (not a worker): makes the modules of ``watch`` (``watch.json``,
    ``memotest/tracer/listing_reports.py``), takes the plugins' ones as extensions and
    starts the listing watch, counting what ran before as ``listings.watch_listings``'s
    ``late`` says; the package."""
    load_all(watch["modules"])
    package = sys.modules[PACKAGE]
    for name in watch["extensions"]:
        package.extensions.register(sys.modules[PACKAGE + "." + name])
    package.listings.watch_listings(late=True)
    package.listings.watch_forks()
    return package


def compiled_here(tag):
    """Whether code compiled as ``tag`` (``compiled:MAGIC:OPTIMIZE``) runs here as this
    interpreter would compile it. ``marshal`` and the import system's external part are
    loaded at every interpreter's start: nothing is imported."""
    external = sys.modules.get("_frozen_importlib_external")
    magic = getattr(external, "MAGIC_NUMBER", None)
    if "marshal" not in sys.modules or "os" not in sys.modules or not isinstance(magic, bytes):
        return False
    return tag == f"compiled:{magic.hex()}:{sys.flags.optimize}"


def unescaped(arg):
    """The bytes memotest escaped into the argument ``arg`` (``command.py``'s ``escaped``:
    an argument holds no NUL byte): ``\\x01\\x03`` is a NUL, ``\\x01\\x02`` a ``\\x01``."""
    data = sys.modules["os"].fsencode(arg)
    return data.replace(b"\x01\x03", b"\x00").replace(b"\x01\x02", b"\x01")


def load_compiled(modules, usable):
    """As :func:`load_all`, of ``NAME PATH SOURCE CODE ...``: each module from its
    ``CODE`` (``marshal``, escaped) if ``usable`` and it has one, else from its source."""
    loads = sys.modules["marshal"].loads
    load_all([])
    for i in range(0, len(modules), 4):
        name, path, source, code = modules[i : i + 4]
        load(name, path, source, loads(unescaped(code)) if usable and code else None)


def main():
    args = sys.argv[3:]
    if args and args[0].startswith("compiled:"):
        load_compiled(args[1:], compiled_here(args[0]))
    else:
        load_all(args)
    job = sys.modules[PACKAGE + ".serve"].main()
    sys.modules[PACKAGE + ".child"].become(*job)


if __name__ == "__main__":
    main()
