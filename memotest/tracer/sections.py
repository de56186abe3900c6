"""Files read only by one reader, for what it parses out of them: that part.

Some files are read by every test of a project, but only for a part of them:

- **``pyproject.toml``**: pytest reads the one of the folders it searches for its
  configuration, and uses only ``[tool.pytest]`` and ``[tool.pytest.ini_options]``. A
  release that bumps a version, a dependency or a linter's settings there changes nothing
  pytest sees.
- **``entry_points.txt``** of an installed distribution: ``importlib.metadata`` reads it
  whenever pytest, stevedore or any plugin loader asks a distribution for its entry points,
  and keeps only the ``name = value`` lines of each ``[group]``. Tools that write it (pbr,
  setuptools) change its blank lines and comments from one release to the next.
- **a gzip file** (``*.gz``) read through Python's ``gzip`` module, which shows its
  reader the data and the header's time, never the header's file name. Hypothesis
  rewrites its Unicode tables (``.hypothesis/unicode_data/*/codec-*.json.gz``) at every
  run, the same data under the random name of the temporary file it wrote first.

As whole-file inputs, the first two re-ran every test of the project; the third made
every test that draws text re-run every other one.

In a run forked from a warm worker, an audit hook sees every ``open`` made through
Python and who made it. Such a file that only its reader opened, in the run's own process
and its worker, and that no other process read, is then an input by what the reader
parses out of it (``Kind.SECTION``):

- a ``pyproject.toml`` opened by pytest's configuration search (code of
  ``_pytest/config/findpaths.py``), by its ``tool.pytest`` table as TOML parses it;
- an ``entry_points.txt`` opened by ``Distribution.read_text`` called from
  ``Distribution.entry_points`` (``importlib.metadata``, or the ``importlib_metadata``
  backport), by its ``(group, name, value)`` triples in order, as that parser makes them.
  Test code that reads the text itself (``read_text`` directly, ``open``) keeps it whole;
- a ``*.gz`` file opened by ``gzip.GzipFile``, by its bytes less the header's file name
  (``FNAME``) and header checksum (``FHCRC``), which ``gzip`` reads past and shows nobody.

A file that no longer parses, or whose part changed in any way, runs the target again.

What this rests on: that C code in the run's process does not read the file (the audit
hook cannot see it), and that memotest's parser accepts what the run's did (a file
memotest cannot parse, or that a reader of another version could parse differently, is
kept whole).

The first part of this module runs inside the warm worker (``warm.py`` includes its
source), in the target's interpreter: the standard library only, Python 3.10 syntax.
"""

import os
import sys

#: The code of pytest's configuration search: ``load_config_dict_from_file`` up to
#: pytest 9.1, ``_parse_toml_file`` from 9.2.
PYTEST_CONFIG_CODE = "/_pytest/config/findpaths.py"
#: ``importlib.metadata`` and its backport.
METADATA_CODE = ("/importlib/metadata/__init__.py", "/importlib_metadata/__init__.py")
#: Path -> whether every open of it so far was its reader's.
OPENS = {}


def pytest_config_opened(frame):
    """Whether pytest's configuration search made this open (``frame``: the opener's)."""
    for _ in range(8):
        if frame is None:
            return False
        if frame.f_code.co_filename.endswith(PYTEST_CONFIG_CODE):
            return True
        frame = frame.f_back
    return False


def entry_points_opened(frame):
    """Whether ``Distribution.entry_points`` made this open, through ``read_text``, which
    returns the text to it alone (``frame``: the opener's)."""
    for _ in range(8):
        if frame is None:
            return False
        if frame.f_code.co_filename.endswith(METADATA_CODE):
            caller = frame.f_back
            return (
                frame.f_code.co_name == "read_text"
                and caller is not None
                and caller.f_code.co_name == "entry_points"
                and caller.f_code.co_filename == frame.f_code.co_filename
            )
        frame = frame.f_back
    return False


def gzip_opened(frame):
    """Whether ``gzip.GzipFile`` made this open (``frame``: the opener's)."""
    return (
        frame is not None
        and frame.f_code.co_filename.endswith("/gzip.py")
        and frame.f_code.co_name == "__init__"
    )


#: The file names, and who must have opened such a file for it to be read for a part.
SECTION_READERS = {
    "pyproject.toml": pytest_config_opened,
    "entry_points.txt": entry_points_opened,
}
GZIP_SUFFIX = ".gz"
SECTION_SUFFIXES = (*SECTION_READERS, GZIP_SUFFIX)


def on_open(event, args):
    """The audit hook: who opened a ``pyproject.toml``, an ``entry_points.txt``, a
    ``*.gz``."""
    if event != "open" or not args:
        return
    path = args[0]
    if isinstance(path, bytes):
        path = os.fsdecode(path)
    if not isinstance(path, str) or not path.endswith(SECTION_SUFFIXES):
        return
    where = os.path.normpath(os.path.join(os.getcwd(), path))
    name = os.path.basename(where)
    reader = SECTION_READERS.get(name) or (gzip_opened if name.endswith(GZIP_SUFFIX) else None)
    if reader is None:
        return
    ours = reader(sys._getframe(1))
    OPENS[where] = OPENS.get(where, True) and ours


def watch_sections():
    sys.addaudithook(on_open)


def section_report():
    """The files only their readers opened."""
    return sorted(path for path, ours in OPENS.items() if ours)
