"""``python -m memotest_make`` is ``memotest-sh`` (for ``SHELL := python3 -m memotest_make``
where the console script is not on PATH)."""

import sys

from memotest_make.shell import main

sys.exit(main())
