"""The machine as one build sees it, at the bottom of the engine.

The file system: :class:`~memotest.world.fingerprint.FileStates` stats each path, hashes
each file and lists each folder at most once per build, however many targets share it
(``fingerprint``); what a program can observe of a path besides its content
(``observable``). The roots stored paths are relative to (``roots``). The network: who
can reach what a tree bound, and which endpoints it used that it did not serve
(``network``); the servers the user vouches for (``services``).

Hands on: a :class:`~memotest.world.fingerprint.Fingerprint` (what a path is now), to the
input kinds (:mod:`memotest.inputs`) and the store.
"""
