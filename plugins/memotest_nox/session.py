"""Runs one nox session for the loader and tells memotest when nox skipped it:
``python -m memotest_nox.session NOX... -R -s SESSION -f noxfile.py``.

nox exits 0 when it skips a session (its interpreter is missing, ``session.skip()``, no
python of the session matches), the same as when the session passed. Its ``--report
FILE`` says which: each session run with ``"result": "skipped"`` and a ``reason``. This
module runs nox with a report in the run's own ``TMPDIR`` (never an input), and when nox
exited 0 and any session it ran (the named one, or one it ``requires``) was skipped, it
writes the reasons into ``MEMOTEST_SKIP_FILE``: the target ends ``skipped``, never a pass,
and is never replayed (:mod:`memotest.run.runner`). Its exit status is nox's.

Standard library only: it runs under the tracer, and what it imports is read there.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile


def skips(report: object) -> list[str]:
    """``SESSION: REASON`` for each session a nox ``--report`` says was skipped."""
    sessions = report.get("sessions") if isinstance(report, dict) else None
    out = []
    for entry in sessions if isinstance(sessions, list) else []:
        if isinstance(entry, dict) and entry.get("result") == "skipped":
            out.append(f"{entry.get('name')}: {entry.get('reason') or 'skipped'}")
    return out


def main(argv: list[str]) -> int:
    if not argv:
        sys.stderr.write("usage: python -m memotest_nox.session NOX ARGS...\n")
        return 2
    folder = tempfile.mkdtemp(prefix="memotest-nox-")
    report = os.path.join(folder, "report.json")
    code = subprocess.call([*argv, "--report", report])
    skip_file = os.environ.get("MEMOTEST_SKIP_FILE")
    if code == 0 and skip_file:
        try:
            with open(report, encoding="utf-8") as f:
                skipped = skips(json.load(f))
        except (OSError, ValueError) as exc:  # unknown whether it skipped: never a pass
            skipped = [f"its --report could not be read ({exc})"]
        if skipped:
            with open(skip_file, "w", encoding="utf-8") as f:
                f.write("nox skipped " + "; ".join(skipped) + "\n")
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
