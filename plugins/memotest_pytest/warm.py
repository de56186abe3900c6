"""What pytest means to a warm worker: its worker-side module, and its part of a report.

A warm worker (``memotest/tracer/warm/``) imports pytest once and forks each target's
run. pytest rewrites the asserts of the modules it imports as plugins (``-p NAME``, the
packages of every distribution with a ``pytest11`` entry point, conftests, what
``register_assert_rewrite`` names), and it cannot rewrite a module imported before it
marked it: it warns so ("Module already imported so cannot be rewritten"), an error under
``filterwarnings = error``, and the asserts are not rewritten. So a module any run's
pytest marked for rewriting must be imported by each run itself: it is never preloaded,
and a run that finds one of the worker's preloaded modules marked anyway (a conftest that
just started to name it as a plugin) runs again as a fresh process.

A run that ran Hypothesis's engine keeps its Python files whole (another run tries other
examples, so runs other code): the next runs with its arguments do not note the code
they execute.

A run of a file whose folder got a conftest of its own since the loader gave it the
worker of a folder above (``pinned.conftest_folder``) stops before its session and runs
again as a fresh process (``worker_side.unfaithful``).
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

from memotest.hookspecs import hookimpl
from memotest.tracer.warm.reading import WarmReading
from memotest_pytest import coverage_side, worker_side


@hookimpl
def memotest_worker_modules() -> list[ModuleType]:
    return [worker_side, coverage_side]


@hookimpl
def memotest_warm_report(report: dict[str, Any]) -> WarmReading | None:
    marks = frozenset(m for m in report.get("marked") or () if isinstance(m, str))
    whole = report.get("code") == worker_side.RAN_HYPOTHESIS
    why = tuple(w for w in report.get("unfaithful") or () if isinstance(w, str))
    return WarmReading(marks, whole, why) if marks or whole or why else None
