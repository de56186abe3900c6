"""memotest + nox: the example of docs/adapters/nox.md.

Memoized sessions (the helper), from this folder:

    nox -s tests        # runs pytest, records what it read
    nox -s tests        # replays: "memotest: nox:tests:1 is up to date", pytest not run
    # edit calc/text.py, then:
    nox -s tests        # runs again

Sessions as memotest targets (the loader), from this folder:

    memotest build      # finds noxfile.py: targets nox:tests, nox:lint
    memotest build      # both cached

The sessions use the current interpreter (venv_backend="none") so that the example runs
offline; drop that to give each session its own venv (then the venv is an input too).
"""

import nox
from memotest_nox import memoized

nox.options.default_venv_backend = "none"


@nox.session
@memoized
def tests(session):
    session.run("python", "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests")


@nox.session
@memoized
def lint(session):
    session.run("python", "-m", "compileall", "-q", "calc")
