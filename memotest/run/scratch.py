"""Scratch folders: a folder a driver empties before every run is the run's own workspace.

A test tool's temporary folder that its driver empties before each run (tox's
``env_tmp_dir``, which tox empties before an env's commands: ``pytest
--basetemp={env_tmp_dir}`` removes it, makes it again and creates its ``<name>current``
links after looking for them) holds nothing the run did not put there. A target's
``scratch`` folders (set by the driver's loader, never by a targets file) are treated as
the private ``TMPDIR`` memotest gives every run: nothing in them, nor the folder itself,
is an input or an output of the record.

Why that is sound: the runner itself makes each one fresh right before every run
(:func:`make_fresh`: removed with everything in it, then made again by ``mkdir`` with the
run's umask, which is part of the key), so every run starts with the same empty folder,
whatever an earlier run, the driver or the user left there; what a run then finds in it
is its own doing, and its own doing follows from its inputs. A replay does not touch the
folder (the next real run empties it anyway). The emptying does not rely on the driver
having done it, nor on the ordering between the driver's emptying and memotest's check.

Refused (the folder is then an ordinary path, its contents inputs as usual): a path
that is not absolute, the file-system root, the target's folder or one of its parents
(emptying it would remove the project), and a folder that cannot be made fresh.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterable


def usable(folder: str, cwd: str) -> bool:
    """Whether ``folder`` may be emptied before a run of a target in ``cwd``."""
    if not os.path.isabs(folder):
        return False
    real = os.path.realpath(folder)
    here = os.path.realpath(cwd)
    if real == os.path.sep or here == real or here.startswith(real.rstrip("/") + "/"):
        return False
    return not (os.path.islink(folder) and not os.path.isdir(folder))


def make_fresh(folders: Iterable[str], cwd: str) -> tuple[str, ...]:
    """Empties and makes again each usable scratch folder; the ones made fresh, which the
    run's record leaves out (the others stay ordinary paths)."""
    fresh = []
    for folder in folders:
        if not usable(folder, cwd):
            continue
        try:
            if os.path.islink(folder):
                os.unlink(folder)
            elif os.path.exists(folder):
                shutil.rmtree(folder)
            os.makedirs(folder)
        except OSError:
            continue
        fresh.append(folder)
    return tuple(fresh)
