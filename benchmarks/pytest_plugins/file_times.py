"""A pytest plugin for ``benchmarks/full_run.py``: what each test file costs inside one
pytest session (``-p file_times``, with ``FILE_TIMES_OUT`` naming the JSON file to write).

Per file, in seconds: the collection of its module (importing it, making its items) and
the run of each of its items (setup, call, teardown: ``pytest_runtest_protocol``).
"""

from __future__ import annotations

import json
import os
import time
from collections import defaultdict
from collections.abc import Generator
from typing import Any

import pytest

TIMES: defaultdict[str, float] = defaultdict(float)


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(collector: pytest.Collector) -> Generator[None, Any, Any]:
    start = time.perf_counter()
    try:
        return (yield)
    finally:
        if isinstance(collector, pytest.Module):
            TIMES[collector.nodeid.split("::", 1)[0]] += time.perf_counter() - start


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Generator[None, Any, Any]:
    start = time.perf_counter()
    try:
        return (yield)
    finally:
        TIMES[item.nodeid.split("::", 1)[0]] += time.perf_counter() - start


def pytest_sessionfinish() -> None:
    out = os.environ.get("FILE_TIMES_OUT")
    if out:
        with open(out, "w", encoding="utf-8") as f:
            json.dump(dict(TIMES), f)
