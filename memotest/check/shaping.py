"""The settings that shape what a record holds, and when a record made under other
settings may still be reused.

A record is what the run observed *minus what the settings let memotest leave out or hold
by less than the whole*. Each such permission is a token:

* ``ignore:PATTERN``: an ``ignore`` pattern (the effective list: the targets file's, the
  core's and every plugin's ``memotest_ignore``); a path it matches is no input;
* ``is_input:PLUGIN:DIGEST``: a plugin's ``memotest_is_input``, which may drop inputs
  (the digest is of the file that defines it, so an edited plugin is another one);
* ``reader:NAME:DIGEST``: a reader (``memotest_readers``), by which a file holds by a part
  of it (the digest is of its pattern, callers and digest function);
* ``code-level``: the modes finer than a file (Python files by the code that ran, folders
  by the entries looked for, files by a reader's part), which ``build --whole-files``
  withdraws.

A record keeps the tokens it was made under that it used (:func:`used`): every
``ignore`` pattern; the ``is_input`` plugins when one of them dropped an input; the
readers its ``section`` inputs hold by; ``code-level`` when it has ``code``, ``entries``
or ``section`` inputs. It is reused only while each of them is still granted
(:func:`withdrawn`). The direction is deliberate: a record made under *fewer*
permissions holds more inputs than the current settings would note, and holds only if
all of them do, so reusing it is sound (adding an ``ignore`` pattern, a reader or a
plugin does not by itself make a record stale); a permission withdrawn may have hidden
an input the current settings note, so such a record is stale, and ``explain`` names the
setting ("the settings that shape records changed: ignore").

``pass_env`` needs no token: which variables it passes, and their values, are the
environment key (:func:`memotest.check.keys.env_key`).
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Iterable, Sequence

from memotest.inputs.readers import Reader, registered
from memotest.load import plugins
from memotest.load.config import Settings
from memotest.model import Input, Kind

#: The groups of tokens, in the order ``explain`` names them, with the setting's name.
GROUPS = {
    "ignore": "ignore",
    "is_input": "is_input",
    "reader": "readers",
    "code-level": "whole-files",
}

#: The kinds finer than a whole file or listing (``--whole-files`` turns them off).
_CODE_LEVEL = (Kind.CODE.value, Kind.ENTRIES.value, Kind.SECTION.value)


def _digest(data: bytes | str) -> str:
    from memotest.check.keys import digest

    return digest(data)[:16]


def _source_digest(obj: object) -> str:
    """The digest of the file that defines ``obj`` (its name when it has no file)."""
    try:
        path = inspect.getsourcefile(obj)  # type: ignore[arg-type]
        if path:
            with open(path, "rb") as f:
                return _digest(f.read())
    except (OSError, TypeError):
        pass
    return _digest(f"{getattr(obj, '__module__', '')}.{getattr(obj, '__qualname__', '')}")


def _reader_token(reader: Reader) -> str:
    what = json.dumps(
        [reader.match, [list(map(str, vars(c).values())) for c in reader.callers]],
        sort_keys=True,
    )
    return f"reader:{reader.name}:{_digest(what + _source_digest(reader.digest))}"


def granted(settings: Settings, *, code_level: bool) -> frozenset[str]:
    """The tokens the current settings and plugins grant (for one build: compute once)."""
    tokens = {f"ignore:{p}" for p in settings.ignore}
    for impl in plugins.manager().hook.memotest_is_input.get_hookimpls():
        tokens.add(f"is_input:{impl.plugin_name}:{_source_digest(impl.function)}")
    tokens.update(_reader_token(r) for r in registered())
    if code_level:
        tokens.add("code-level")
    return frozenset(tokens)


def used(granted: frozenset[str], inputs: Sequence[Input], *, dropped: bool) -> list[str]:
    """The tokens of ``granted`` that a record of ``inputs`` was shaped by (``dropped``:
    a plugin's ``memotest_is_input`` left an input out)."""
    kinds = {Kind(i.kind).value for i in inputs}
    readers = {i.digest.split(":", 1)[0] for i in inputs if Kind(i.kind) is Kind.SECTION}
    out = []
    for token in granted:
        group, _, rest = token.partition(":")
        if (
            group == "ignore"
            or (group == "is_input" and dropped)
            or (group == "reader" and rest.split(":", 1)[0] in readers)
            or (token == "code-level" and kinds.intersection(_CODE_LEVEL))
        ):
            out.append(token)
    return sorted(out)


def withdrawn(recorded: Iterable[str], granted: frozenset[str]) -> list[str]:
    """The settings (names of :data:`GROUPS`) of which a record used a token that is no
    longer granted: empty when the record may be reused."""
    gone = {GROUPS.get(t.partition(":")[0], t) for t in recorded if t not in granted}
    return [name for name in GROUPS.values() if name in gone] + sorted(gone - set(GROUPS.values()))
