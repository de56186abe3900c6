"""memotest adapter for nox: a loader (sessions as targets) and the ``memoized`` helper.

``plugin`` is the pluggy plugin (the ``memotest`` entry point ``nox``); ``helper`` holds
:func:`memoized`, re-exported as ``memotest.nox.memoized`` for noxfiles.
"""
