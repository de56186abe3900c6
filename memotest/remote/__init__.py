"""The remote cache: records shared by every machine that builds the same project.

Local first, then remote. A target stale in the local store asks the remote (once per
build, before running: :mod:`~memotest.remote.fetch`); what comes back is put into the
local store and checked against the local files exactly as a local record, so the remote
only ever proposes and the local files decide. Passing, cacheable results are uploaded in
the background (:mod:`~memotest.remote.cache`), unless the remote is read-only.

The rooms, one module each:

- :mod:`~memotest.remote.backends`: the bytes, behind ``get``/``put``/``has``: the plain
  HTTP cache protocol (bazel-remote, ccache, nginx WebDAV) and Redis; timeouts;
- :mod:`~memotest.remote.wire`: what travels (records, manifests, keys) and its
  HMAC-SHA256 signatures;
- :mod:`~memotest.remote.cache`: one build's remote: faults, the circuit breaker, counts,
  uploads;
- :mod:`~memotest.remote.fetch`: asking it for the stale targets.

Which remote (:func:`remote_url`): ``--remote URL`` wins over ``MEMOTEST_REMOTE``, which
wins over the ``remote`` setting; ``--no-remote`` turns it off. ``--remote-read-only`` or
``MEMOTEST_REMOTE_READ_ONLY=1`` uploads nothing; ``MEMOTEST_REMOTE_KEY`` signs and checks
(:func:`remote_key`: a key that is set must be usable, never taken as "no key").
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from memotest.errors import UsageError

if TYPE_CHECKING:
    from memotest.load.config import Settings
    from memotest.remote.backends import DEFAULT_MAX_ANSWER, DEFAULT_TIMEOUT, Backend
    from memotest.remote.cache import RemoteCache, summary_line

# A build without a remote only asks remote_url: the rooms (http.client, ssl: a tenth of a
# no-op build's start) are imported when a remote is used, and the names below on first use.
_LAZY = {
    "DEFAULT_MAX_ANSWER": "memotest.remote.backends",
    "DEFAULT_TIMEOUT": "memotest.remote.backends",
    "RemoteCache": "memotest.remote.cache",
    "summary_line": "memotest.remote.cache",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "DEFAULT_MAX_ANSWER",
    "DEFAULT_TIMEOUT",
    "RemoteCache",
    "open_remote",
    "remote_key",
    "remote_url",
    "summary_line",
]

#: The shortest key memotest signs with: a shorter one is guessed from one signed record.
MIN_KEY_LENGTH = 16


def remote_url(
    options: argparse.Namespace, settings: Settings, environ: Mapping[str, str]
) -> str | None:
    """The remote this build uses, if any: the flag, the variable, the setting."""
    if getattr(options, "no_remote", False):
        return None
    return (
        getattr(options, "remote", None)
        or environ.get("MEMOTEST_REMOTE")
        or getattr(settings, "remote", None)
        or None
    )


def open_remote(
    options: argparse.Namespace, settings: Settings, environ: Mapping[str, str]
) -> RemoteCache | None:
    """This build's remote cache (None when there is none); a URL memotest cannot use
    (another scheme, Redis without its extra) is a :class:`UsageError`."""
    url = remote_url(options, settings, environ)
    if not url:
        return None
    from memotest.remote.backends import DEFAULT_MAX_ANSWER, DEFAULT_TIMEOUT
    from memotest.remote.cache import RemoteCache
    from memotest.remote.wire import Signer

    signer = Signer(remote_key(environ))
    timeout = getattr(settings, "remote_timeout", None) or DEFAULT_TIMEOUT
    max_answer = getattr(settings, "remote_max_answer", None) or DEFAULT_MAX_ANSWER
    try:
        backend = open_backend(url, timeout, max_answer)
    except (ValueError, ImportError) as exc:
        raise UsageError(str(exc)) from None
    read_only = bool(getattr(options, "remote_read_only", False)) or environ.get(
        "MEMOTEST_REMOTE_READ_ONLY", ""
    ) not in ("", "0")
    return RemoteCache(backend, read_only=read_only, signer=signer, timeout=timeout)


def open_backend(url: str, timeout: float, max_answer: int) -> Backend:
    """The backend a URL names; ``ValueError`` for a URL memotest cannot use (another
    scheme, :func:`~memotest.remote.backends.check_url`), ``ImportError`` (naming the
    extra) for Redis without the ``redis`` package. Here, above both backends: the Redis
    one builds on :mod:`memotest.remote.backends`."""
    from memotest.remote.backends import HttpBackend, check_url

    scheme = check_url(url)
    if scheme in ("http", "https"):
        return HttpBackend(url, timeout, max_answer)
    from memotest.remote.redis_backend import RedisBackend

    return RedisBackend(url, timeout, max_answer)


def remote_key(environ: Mapping[str, str]) -> str | None:
    """The key of ``MEMOTEST_REMOTE_KEY``; None only when the variable is not set. A key
    that is set but unusable is a :class:`UsageError`, never "no key": empty or blank
    (what an unset CI secret expands to), not UTF-8, holding a control character, or
    shorter than :data:`MIN_KEY_LENGTH` characters."""
    key = environ.get("MEMOTEST_REMOTE_KEY")
    if key is None:
        return None
    fix = (
        "set the secret (e.g. `openssl rand -hex 32`), "
        "or unset the variable to use the remote unsigned"
    )
    if not key.strip():
        raise UsageError(
            "MEMOTEST_REMOTE_KEY is set but empty (what an unset CI secret expands to): " + fix
        )
    try:
        key.encode("utf-8")
    except UnicodeEncodeError:
        raise UsageError("MEMOTEST_REMOTE_KEY is not UTF-8 text: " + fix) from None
    if any(ord(c) < 32 or ord(c) == 127 for c in key):
        raise UsageError("MEMOTEST_REMOTE_KEY holds a control character (a newline?): " + fix)
    if len(key) < MIN_KEY_LENGTH:
        raise UsageError(
            f"MEMOTEST_REMOTE_KEY is {len(key)} characters long, too short to sign with "
            f"(at least {MIN_KEY_LENGTH}): " + fix
        )
    return key
