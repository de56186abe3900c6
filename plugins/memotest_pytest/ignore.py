"""Caches of test tools that are never an input of a target.

pytest writes ``.pytest_cache/`` (``lastfailed``, ``nodeids``, ...) on every run and reads
it back on the next: taken as an input, every run would change the next one's inputs and
no result would ever be replayed. Runs memotest makes pass ``-p no:cacheprovider``; this
covers the targets that run pytest their own way.

Hypothesis keeps tables of the running Python's Unicode data in
``.hypothesis/unicode_data/<Unicode version>/`` (``charmap.json.gz``, the characters of
each category; ``codec-v2-<codec>.json.gz``, the characters a codec encodes), made in
``.hypothesis/tmp/`` and renamed there. Each is what Hypothesis computes again where it
is missing or does not load, from the same ``unicodedata`` and codec, so what a test sees
does not depend on the file: and ``intervals_from_codec`` writes its table again each
time it is called, the same bytes, which made every run that used it not reusable (a
file read and then written) and any two such runs side by side a hazard. The other
folders of ``.hypothesis/`` stay inputs: ``examples/`` (the saved failing examples a run
replays) and ``constants/`` (the constants of each local module, by its source's hash).

It is these tools' knowledge, so the patterns are this plugin's ``memotest_ignore``,
added to every project's ``ignore``.
"""

from __future__ import annotations

from memotest.hookspecs import hookimpl
from memotest.load.plugins import Config

#: Hypothesis's Unicode tables and the scratch folder it makes them in.
HYPOTHESIS_TABLES = ["**/.hypothesis/unicode_data/**", "**/.hypothesis/tmp/**"]


@hookimpl
def memotest_ignore(config: Config) -> list[str]:
    return ["**/.pytest_cache/**", *HYPOTHESIS_TABLES]
