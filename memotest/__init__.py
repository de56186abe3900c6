"""memotest: test targets as memoized build steps.

A target runs once under a tracer that records everything its process tree observed on the
file system; while every observation still holds, the target is not run again and its last
result and log are replayed.
"""

__version__ = "0.1.0"
