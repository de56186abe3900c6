"""memotest adapter for tox 4: memoize each tox env's commands.

Installing memotest next to tox activates :mod:`memotest_tox.tox_plugin` (entry point
``memotest`` in the ``tox`` group). For every env that runs commands, the plugin swaps
``commands_pre``, ``commands`` and ``commands_post`` for one command,
``python -m memotest_tox.exec SPEC.json`` run with the host interpreter. That process runs
in exactly the environment tox gives commands; it asks :func:`memotest.memo.run_memoized`
whether the env's last result still holds, and otherwise runs the original commands (through
:mod:`memotest_tox.seq`, with tox's semantics) under the tracer and records them.

Modules:

- :mod:`memotest_tox.tox_plugin`: the tox hooks (options, the ``memotest`` env setting, the
  swap of the commands and its undoing).
- :mod:`memotest_tox.exec`: the swapped-in command (checks the store, replays or runs).
- :mod:`memotest_tox.seq`: the traced program that runs the original commands in sequence.
- :mod:`memotest_tox.plugin`: the ``memotest`` plugin (``memotest build --from tox``).
- :mod:`memotest_tox.list_envs`: run by the plugin to read a config file's envs with tox.

This ``__init__`` stays empty of code: :mod:`memotest_tox.seq` runs traced, so everything
the package imports is an input of every tox env's record; and the modules import nothing
from it, so they also work when an (old) editable install maps the folder as a namespace
package.

See ``docs/adapters/tox.md``.
"""
