"""Makes the worker's modules in the target's interpreter, then starts the worker.

memotest runs ``PYTHON -c <this file's text> CONFIG LISTINGS NAME PATH SOURCE ...``: this
file makes each ``NAME`` the module ``_memotest_worker.NAME`` of a package of its own
(never a name the target's code could import), compiled from ``SOURCE`` under its real
``PATH``, in the order given (a module comes after those it imports), then runs the
worker (``serve.main``) and, in each child it forks, the run (``child.become``).

A plain pytest process loads some of the modules the same way (``load_all``, from this
file's text: ``plugins/memotest_pytest/walk_path/memotest_walk.py``), to watch its
listings (``listings.py``).

The interpreter has only ``sys`` and what its start-up imported when this runs; the
modules' top-level imports are those the watchers need: what is imported before they
start is taken to have been looked for in every folder listed until then (``listings``).
"""

import sys

PACKAGE = "_memotest_worker"


def load(name, path, source):
    """Makes and runs the module ``PACKAGE.name`` from ``source`` (the file at ``path``)."""
    module = type(sys)(PACKAGE + "." + name)
    module.__file__ = path
    module.__package__ = PACKAGE
    sys.modules[module.__name__] = module
    setattr(sys.modules[PACKAGE], name, module)
    exec(compile(source, path, "exec", dont_inherit=True), module.__dict__)
    return module


def load_all(modules):
    """Makes the package, then each module of ``modules`` (``NAME PATH SOURCE ...``, flat)."""
    package = type(sys)(PACKAGE)
    package.__path__ = []
    package.__package__ = PACKAGE
    sys.modules[PACKAGE] = package
    for i in range(0, len(modules), 3):
        load(*modules[i : i + 3])


def main():
    load_all(sys.argv[3:])
    job = sys.modules[PACKAGE + ".serve"].main()
    sys.modules[PACKAGE + ".child"].become(*job)


if __name__ == "__main__":
    main()
