"""Folders listed only to look for certain names in them: the record of those names.

A folder of the project that only looking readers listed in a run forked from a warm
worker (the import system, ``importlib.metadata``, ``glob``, code a plugin knows: see
``memotest/worker/listings.py`` for which and why) is an input by those of its entries
that match what they looked for (``Kind.ENTRIES``). This module makes that record and
checks it against the folder's entries now.
"""

import fnmatch


def entries_matcher(looks, patterns):
    """A test of an entry name: whether it is among ``looks`` or matches ``patterns``."""
    exact = frozenset(looks)
    plain = tuple(p for p in patterns if not p.startswith("i:"))
    folded = tuple(p[2:] for p in patterns if p.startswith("i:"))

    def matches(name):
        if name in exact:
            return True
        if any(fnmatch.fnmatchcase(name, p) for p in plain):
            return True
        low = name.lower()
        return any(fnmatch.fnmatchcase(low, p) for p in folded)

    return matches


def entries_record(looks, patterns, names):
    """The fingerprint's content (JSON bytes): what was looked for, and which of the
    folder's entry ``names`` matched."""
    import json

    matches = entries_matcher(looks, patterns)
    present = sorted(n for n in names if matches(n))
    return json.dumps(
        {"looks": sorted(looks), "patterns": sorted(patterns), "present": present}
    ).encode()


def entries_changed(blob, names):
    """None if the folder's entry ``names`` now match what ``blob`` (:func:`record`)
    names, else ``(gained, lost)``: the entries looked for that appeared and went."""
    import json

    try:
        recorded = json.loads(blob)
    except ValueError:
        return ["?"], []
    matches = entries_matcher(recorded.get("looks", ()), recorded.get("patterns", ()))
    now = {n for n in names if matches(n)}
    before = set(recorded.get("present", ()))
    if now == before:
        return None
    return sorted(now - before), sorted(before - now)
