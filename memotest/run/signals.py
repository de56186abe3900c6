"""The signals a terminal session decides, set to one value for every run.

``nohup`` ignores ``SIGHUP``; a shell's background job (``cmd &`` without job control)
ignores ``SIGINT`` and ``SIGQUIT``. An ignored signal stays ignored across ``exec``, so a
test run from there would see it ignored, and the key (``keys.process_state``: the signals
ignored) would differ from a run in a terminal: a record made under ``nohup`` would re-run
from a normal shell. A *handled* signal is reset to its default by ``exec``. So memotest
handles those three itself with a handler that does nothing (to memotest they stay as
good as ignored), and every command it starts gets them at their default, wherever it was
started from; the key, read from this process afterwards, no longer names them. Off the
main thread (a plugin host's worker thread) this cannot be done, and they stay ignored,
and keyed, as before.
"""

from __future__ import annotations

import signal
import threading

#: The signals a terminal session (``nohup``, a background job) sets to ignored.
TERMINAL = tuple(getattr(signal, n) for n in ("SIGHUP", "SIGINT", "SIGQUIT") if hasattr(signal, n))


def _ignore(signum: int, frame: object) -> None:
    """Does nothing: the signal is as good as ignored here, and at its default after
    ``exec``."""


def uniform_terminal_signals() -> None:
    """Replaces an ignored :data:`TERMINAL` signal by a handler that does nothing (see the
    module's docstring); a signal not ignored is left as it is (``SIGINT`` stays Python's
    ``KeyboardInterrupt``)."""
    if threading.current_thread() is not threading.main_thread():
        return
    for sig in TERMINAL:
        try:
            if signal.getsignal(sig) == signal.SIG_IGN:
                signal.signal(sig, _ignore)
        except (OSError, ValueError):
            continue
