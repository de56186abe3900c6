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
``MEMOTEST_REMOTE_READ_ONLY=1`` uploads nothing; ``MEMOTEST_REMOTE_KEY`` signs and checks.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping

from memotest.config import Settings
from memotest.errors import UsageError
from memotest.remote.backends import DEFAULT_TIMEOUT, open_backend
from memotest.remote.cache import RemoteCache, summary_line
from memotest.remote.wire import Signer

__all__ = ["DEFAULT_TIMEOUT", "RemoteCache", "open_remote", "remote_url", "summary_line"]


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
    timeout = getattr(settings, "remote_timeout", None) or DEFAULT_TIMEOUT
    try:
        backend = open_backend(url, timeout)
    except (ValueError, ImportError) as exc:
        raise UsageError(str(exc)) from None
    read_only = bool(getattr(options, "remote_read_only", False)) or environ.get(
        "MEMOTEST_REMOTE_READ_ONLY", ""
    ) not in ("", "0")
    return RemoteCache(
        backend, read_only=read_only, signer=Signer(environ.get("MEMOTEST_REMOTE_KEY") or None)
    )
