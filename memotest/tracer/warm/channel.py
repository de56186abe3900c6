"""The warm worker's answers: JSON lines from a pipe, read with a timeout."""

from __future__ import annotations

import json
import os
import select
import time
from typing import IO, Any


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
        return json.loads(line)
