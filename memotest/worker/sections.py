"""Files opened only by their reader: which ones, so that they hold by its part of them.

Some files are read by every run of a project, but only for a part of them (a
configuration search takes one table of ``pyproject.toml``, ``importlib.metadata`` the
``name = value`` lines of an ``entry_points.txt``, ``gzip`` the data but not the header's
file name). memotest's side keeps, for each such *reader*, the pattern of the files it
reads, who must have opened such a file for it to be read for a part (its *callers*),
and how to take that part (``memotest.inputs.readers``). The worker gets the readers that
have callers in its start-up config (``"readers"``)::

    [{"name": str, "match": str,
      "callers": [{"files": [str, ...], "function": str | None,
                   "called_from": str | None, "depth": int}]}]

An audit hook sees every ``open`` made through Python and who made it. The first reader
whose ``match`` (an ``fnmatch`` pattern) fits a file's base name claims the open; the open
is its reader's when one of its callers made it: walking up at most ``depth`` frames from
the code that called ``open``, the first frame whose file ends with one of ``files`` runs
``function`` (when set), called by ``called_from`` in the same file (when set). A file
that only its reader opened, in the run's own process and its worker, and that no other
process read, is then an input by that part (``Kind.SECTION``); any other open keeps it
whole.

What this rests on: that C code in the run's process does not read the file (the audit
hook cannot see it), and that memotest's parser accepts what the run's did (a file
memotest cannot parse, or that a reader of another version could parse differently, is
kept whole).
"""

import fnmatch
import os
import re

from . import audit

#: Path -> whether every open of it so far was its reader's.
OPENS = {}
#: The readers, in order: the expression of the file names each reads, and its callers.
READERS = []


def use_readers(table):
    """Takes the readers table of the worker's config."""
    for reader in table:
        callers = [
            (tuple(c["files"]), c.get("function"), c.get("called_from"), int(c.get("depth", 8)))
            for c in reader["callers"]
        ]
        READERS.append((re.compile(fnmatch.translate(reader["match"])).match, callers))


def called_by(frame, caller):
    """Whether the code of ``frame`` (the opener's) was called by ``caller``."""
    files, function, called_from, depth = caller
    for _ in range(depth):
        if frame is None:
            return False
        code = frame.f_code
        if code.co_filename.endswith(files):
            if function is not None and code.co_name != function:
                return False
            if called_from is None:
                return True
            up = frame.f_back
            return (
                up is not None
                and up.f_code.co_name == called_from
                and up.f_code.co_filename == code.co_filename
            )
        frame = frame.f_back
    return False


def on_open(args, frame):
    """The watcher of ``open``: who opened a file some reader reads."""
    if not args:
        return
    path = args[0]
    if isinstance(path, bytes):
        path = os.fsdecode(path)
    if not isinstance(path, str):
        return
    name = path.rpartition("/")[2]
    callers = next((callers for match, callers in READERS if match(name)), None)
    if callers is None:
        return
    where = os.path.normpath(os.path.join(os.getcwd(), path))
    ours = any(called_by(frame, caller) for caller in callers)
    OPENS[where] = OPENS.get(where, True) and ours


def watch_sections(table):
    """Watches the opens of the files of the readers in ``table``."""
    use_readers(table)
    if READERS:
        audit.watch("open", on_open)


def section_report():
    """The files only their readers opened."""
    return sorted(path for path, ours in OPENS.items() if ours)
