"""The warm worker's answers: JSON lines from a pipe, read with a timeout."""

from __future__ import annotations

import json
import os
import re
import select
import time
from typing import IO, Any

#: The start of the answer for a run that ended (``memotest/worker/serve.py``'s
#: ``send_ended``), whose report the worker sends as the run wrote it.
ENDED = re.compile(rb'\{"pid": (\d+), "status": (-?\d+), "report": ')


def parsed(line: bytes) -> dict[str, Any]:
    """The message ``line``; for the answer of a run whose report is not JSON (the run
    wrote into the memory file it goes to), that answer without a report."""
    try:
        return json.loads(line)
    except ValueError:
        ended = ENDED.match(line)
        if ended is None:
            raise
        return {"pid": int(ended[1]), "status": int(ended[2]), "report": None}


class Channel:
    """JSON lines from a pipe, with a timeout."""

    def __init__(self, stream: IO[bytes]) -> None:
        self.fd = stream.fileno()
        self.buf = b""

    def read(self, timeout: float | None) -> dict[str, Any] | None:
        """The next message; None at end of file; TimeoutError after ``timeout``."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while b"\n" not in self.buf:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            ready, _, _ = select.select([self.fd], [], [], left)
            if not ready:
                raise TimeoutError
            chunk = os.read(self.fd, 65536)
            if not chunk:
                return None
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return parsed(line)
