"""``python -m memotest_make`` is ``memotest-sh-py``: memotest-sh without its C front (for
``SHELL := python3 -m memotest_make`` where memotest-sh is not on PATH; no fast replay)."""

import sys

from memotest_make.shell import main

sys.exit(main())
