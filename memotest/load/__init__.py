"""Loading: the plugins, and the project they load.

The plugin manager (``plugins``) registers the core's own plugins, every ``memotest``
entry point (found by ``entrypoints`` without importing ``importlib.metadata``) and
``MEMOTEST_PLUGINS``, and asks them for the project; ``config`` holds what every loader
makes and checks it (:func:`~memotest.load.config.load_project`).

Hands on: a :class:`~memotest.load.config.Project` (its ``Settings`` and
:class:`~memotest.model.Target` s), with the :class:`~memotest.load.plugins.Config` every
hook gets.
"""
