"""The input kinds: one module each, and the readers that hold a file by a part of it.

A record's inputs are observations of paths, each of one kind (``Kind``, stored by name):
``file`` (``file.py``), ``absent``, ``dir``, ``list`` (``listing.py``), ``other``, and
the finer kinds a run forked from a warm worker can show: ``code``, ``entries``,
``section``. Each module owns its kind's whole life (``base.py`` says what that is);
``registry.py`` lists them, ``check.py`` checks recorded inputs against the file system,
and ``readers.py`` is the registry of readers that ``section`` inputs hold by.
"""
