"""The worker's one audit hook: each event goes to the parts that watch it.

``sys.addaudithook`` hooks cannot be removed, and every one is called for every event
of the process. So the worker installs one, the first time a part asks to watch an event,
and dispatches by a table: event name -> the watchers, called with the event's arguments
and the frame of the code that raised it (the caller of ``open``, ``os.listdir``...).
"""

import sys

#: Event name -> the watchers of it, in the order they asked.
TABLE = {}


def hook(event, args):
    watchers = TABLE.get(event)
    if watchers is None:
        return
    frame = sys._getframe(1)
    for watcher in watchers:
        watcher(args, frame)


def watch(event, watcher):
    """Calls ``watcher(args, frame)`` for each audit event named ``event`` from now on."""
    if not TABLE:
        sys.addaudithook(hook)
    TABLE.setdefault(event, []).append(watcher)
