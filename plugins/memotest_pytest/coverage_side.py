"""coverage's search for the files no test ran, told to the listing watch as what it uses.

With ``--cov=FOLDER`` (``pytest --cov=.``: the rootdir), coverage reports every Python
file under the folder, run or not: ``coverage.files.find_python_files`` walks it with
``os.walk`` and keeps the files whose names end in ``.py`` or ``.pyw`` (and look like a
module's), and goes into every sub-folder, where it stops unless ``__init__.py`` is there.
So of each folder it lists it uses: ``__init__.py``, the ``*.py`` and ``*.pyw`` entries,
and every directory (not a symbolic link to one: ``os.walk`` does not follow them), which
it goes into (``d:*``: ``memotest/inputs/entries.py``). A file a run leaves there (its
``.coverage``, a report) re-runs nothing; a new module or package does.

memotest sends this module to each warm worker and to the plain pytest processes it
watches (``memotest_worker_modules``, ``memotest/worker/extensions.py``): only the
standard library, and nothing may raise.
"""

import os

#: What ``find_python_files`` uses of a folder it lists: names, and ``fnmatch`` patterns.
NAMES = ("__init__.py",)
PATTERNS = ("*.py", "*.pyw", "d:*")
#: The most ``os.walk`` frames between a listing and coverage's code (3.11's ``os.walk``
#: recurses, one frame a level); deeper, the folder stays whole.
DEPTH = 64
FILES = os.path.join("coverage", "files.py")
#: The file name of ``os``'s code: frozen into the interpreter since 3.11.
OS_FILES = ("<frozen os>",)


def listing(where, frame):
    """A folder listed by ``os.walk`` for ``find_python_files``: what that uses of it."""
    walked = 0
    code = frame.f_code
    while code.co_filename in OS_FILES or code.co_filename.endswith("/os.py"):
        if code.co_name not in ("walk", "_walk"):
            return None
        walked += 1
        frame = frame.f_back
        if frame is None or walked > DEPTH:
            return None
        code = frame.f_code
    if walked and code.co_name == "find_python_files" and code.co_filename.endswith(FILES):
        return NAMES, PATTERNS
    return None
