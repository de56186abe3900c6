"""memotest's settings for a tox project: the ``[memotest]`` section of ``tox.ini``.

A tox user has no ``memotest.toml`` (with one, memotest would load it instead of
``tox.ini``), so the one setting a tox env may need, ``services`` (the endpoints outside
the env whose data the user vouches never changes a result: ``memotest/world/services.py``), is
read from ``tox.ini`` itself, as other tools' sections are::

    [memotest]
    services =
        127.0.0.1:6379
        /run/postgresql/.s.PGSQL.*

Both the loader (``memotest build`` in a tox project) and the memoization inside tox
(``tox`` with the plugin installed) read it, and a note that advises declaring an
endpoint names this section (:func:`reword`), not ``settings.services``.
"""

from __future__ import annotations

from pathlib import Path

from memotest.errors import ConfigError
from memotest.world.services import check_services

SECTION = "memotest"
#: What a tox user declares an endpoint with, in the words of a note.
HINT = "services in the [memotest] section of tox.ini"


def services(tox_ini: Path) -> tuple[str, ...]:
    """The ``services`` of ``tox_ini``'s ``[memotest]`` section (none when there is no
    such file or section); a wrong entry is a :class:`ConfigError` naming the file."""
    if tox_ini.name != "tox.ini" or not tox_ini.is_file():
        return ()
    import configparser  # here: every memotest command loads the tox plugin

    parser = configparser.ConfigParser(interpolation=None)
    try:
        parser.read(tox_ini, encoding="utf-8")
    except (configparser.Error, UnicodeDecodeError) as exc:
        raise ConfigError(f"{tox_ini}: cannot read [{SECTION}]: {exc}") from None
    if not parser.has_option(SECTION, "services"):
        return ()
    entries = tuple(parser.get(SECTION, "services").split())
    mistake = check_services(entries)
    if mistake:
        raise ConfigError(f"{tox_ini}: [{SECTION}] services: {mistake}")
    return entries


def reword(note: str | None) -> str | None:
    """A note's advice to declare an endpoint, in a tox user's words."""
    return note.replace("settings.services", HINT) if note else note
