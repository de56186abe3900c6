"""pytest's cache folder is never an input of a target.

pytest writes ``.pytest_cache/`` (``lastfailed``, ``nodeids``, ...) on every run and reads
it back on the next: taken as an input, every run would change the next one's inputs and
no result would ever be replayed. Runs memotest makes pass ``-p no:cacheprovider``; this
covers the targets that run pytest their own way. It is pytest's knowledge, so the pattern
is this plugin's ``memotest_ignore``, added to every project's ``ignore``.
"""

from __future__ import annotations

from memotest.hookspecs import hookimpl
from memotest.load.plugins import Config


@hookimpl
def memotest_ignore(config: Config) -> list[str]:
    return ["**/.pytest_cache/**"]
