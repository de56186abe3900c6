"""Which code objects a run executed, told by ``sys.monitoring`` (Python 3.12+).

The same interface as the ``_executed`` extension (``start``, ``phase``, ``stop``,
``supported``), without a frame-evaluation hook: a PEP 523 hook sees every call, and while
it is set the interpreter makes no Python-to-Python call inline. Here the ``PY_START``
and ``PY_RESUME`` events call :func:`noted` once per code object (and resume point):
it notes the code and returns ``DISABLE``, so that it is not called for it again.
:func:`phase` re-enables them (``restart_events``), so that each phase sees what ran in it
again, as the extension's phase table does.

The tool id is the first free of those no tool has a conventional use for (3 and 4), then
the profiler's and the debugger's; a run whose own code takes one (coverage takes 1) does
not displace it. ``stop`` says the noting was not intact when the tool or its events were
changed meanwhile by something else.
"""

import sys

#: Tool ids to try, in order (``sys.monitoring``: 0 debugger, 1 coverage, 2 profiler,
#: 5 optimizer; 3 and 4 have no conventional user).
TOOLS = (3, 4, 2, 0)
NAME = "memotest"


class Monitored:
    """Notes the code objects a process executes, in every thread, with ``sys.monitoring``."""

    supported = hasattr(sys, "monitoring")

    def __init__(self):
        self.codes = {}  # id -> code: held, so that ids are never reused while noted
        self.phase_codes = {}
        self.phasing = False
        self.tool = None
        self.events = 0
        #: Whether :meth:`start` has the code this process ran before (a worker's, whose
        #: noting returned ``DISABLE`` for it) noted again when it runs again. A run that
        #: labels no phases leaves it off: what the worker's noting saw ran while it
        #: prepared, and counts as every run's (``prepared_code.py``); restarting the
        #: events has every code object the run executes instrumented again.
        self.restarts = True

    def start(self):
        monitoring = sys.monitoring
        if self.tool is not None:
            raise RuntimeError("already started")
        for tool in TOOLS:
            try:
                monitoring.use_tool_id(tool, NAME)
            except ValueError:
                continue
            self.tool = tool
            break
        else:
            raise RuntimeError("no sys.monitoring tool id is free")
        self.events = monitoring.events.PY_START | monitoring.events.PY_RESUME
        disable = monitoring.DISABLE
        codes = self.codes
        phase_codes = self.phase_codes
        phasing = self

        def noted(code, offset):
            key = id(code)
            if key not in codes:
                codes[key] = code
            if phasing.phasing:
                phase_codes[key] = code
            return disable

        monitoring.register_callback(self.tool, monitoring.events.PY_START, noted)
        monitoring.register_callback(self.tool, monitoring.events.PY_RESUME, noted)
        monitoring.set_events(self.tool, self.events)
        if self.restarts:  # what ran before is noted again when it runs again
            monitoring.restart_events()

    def phase(self):
        """The code objects noted since the last call (all noted from now on when first
        called)."""
        if self.tool is None:
            raise RuntimeError("not started")
        codes = list(self.phase_codes.values())
        self.phase_codes.clear()
        self.phasing = True
        sys.monitoring.restart_events()  # what ran before runs in this phase too
        return codes

    def stop(self):
        """Stops; returns (the code objects noted, whether the noting was never displaced)."""
        monitoring = sys.monitoring
        if self.tool is None:
            raise RuntimeError("not started")
        tool, self.tool = self.tool, None
        intact = monitoring.get_tool(tool) == NAME and monitoring.get_events(tool) == self.events
        if monitoring.get_tool(tool) == NAME:
            monitoring.set_events(tool, 0)
            monitoring.register_callback(tool, monitoring.events.PY_START, None)
            monitoring.register_callback(tool, monitoring.events.PY_RESUME, None)
            monitoring.free_tool_id(tool)
        codes = list(self.codes.values())
        self.codes.clear()
        self.phase_codes.clear()
        self.phasing = False
        return codes, intact


def load_executed(cfg):
    """What notes the code a run executed, or None: on Python 3.12+ ``sys.monitoring``
    (:class:`Monitored`), unless ``noting`` is ``frame-hook``; else the extension."""
    path = cfg.get("executed")
    wanted = cfg.get("code", bool(path))
    if not wanted or sys.implementation.cache_tag != cfg.get("tag"):
        return None
    if Monitored.supported and cfg.get("noting") != "frame-hook":
        return Monitored()
    if not path:
        return None
    try:
        import importlib.util

        spec = importlib.util.spec_from_file_location("_executed", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module if module.supported else None
    except BaseException:
        return None
