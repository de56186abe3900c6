"""memotest: test targets as memoized build steps.

A target runs once under a tracer that records everything its process tree observed on the
file system; while every observation still holds, the target is not run again and its last
result and log are replayed.
"""

__version__ = "0.1.0"

#: Bumped when what a record means changes; records of another recorder are stale. Here,
#: beside the version it is made of, at the bottom of every import: the store compares it
#: and the make adapter's stamps watch this file (``memotest_make.stamp.key_sources``).
RECORDER = f"memotest-{__version__}/4"
