"""Runs one tox env for ``memotest build --from tox`` and tells memotest when tox skipped
it: ``python -m memotest_tox.run_env TOX ARGS...``.

tox exits 0 when it skips an env (``skip_missing_interpreters`` and no interpreter for
it), the same as when the env passed. Its ``--result-json FILE`` says which
(``testenvs.ENV.result.skipped``), and its output says why (``ENV: skipped because ...``).
This module runs tox with a result file in the run's own ``TMPDIR`` (never an input),
passes its output through, and when tox exited 0 and an env was skipped, writes the
reason into ``MEMOTEST_SKIP_FILE``: the target ends ``skipped``, never a pass, and is
never replayed (:mod:`memotest.run.runner`). Its exit status is tox's.

Standard library only: it runs under the tracer, and what it imports is read there.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile

_WHY = re.compile(r"^(?P<env>\S+): skipped because (?P<why>.+)$")


def outcomes(result: object) -> dict[str, dict]:
    """Each env a tox ``--result-json`` has a result for (the envs it ran or skipped)."""
    envs = result.get("testenvs") if isinstance(result, dict) else None
    out = {}
    for name, entry in envs.items() if isinstance(envs, dict) else ():
        outcome = entry.get("result") if isinstance(entry, dict) else None
        if isinstance(outcome, dict):
            out[str(name)] = outcome
    return out


def main(argv: list[str]) -> int:
    if not argv:
        sys.stderr.write("usage: python -m memotest_tox.run_env TOX ARGS...\n")
        return 2
    result = os.path.join(tempfile.mkdtemp(prefix="memotest-tox-"), "result.json")
    why: dict[str, str] = {}
    proc = subprocess.Popen([*argv, "--result-json", result], stdout=subprocess.PIPE)
    assert proc.stdout is not None
    out = sys.stdout.buffer
    for line in proc.stdout:
        out.write(line)
        out.flush()
        m = _WHY.match(line.decode("utf-8", "replace").strip())
        if m:
            why[m.group("env")] = m.group("why")
    code = proc.wait()
    skip_file = os.environ.get("MEMOTEST_SKIP_FILE")
    if not skip_file or code not in (0, 1):
        return code
    try:
        with open(result, encoding="utf-8") as f:
            envs = outcomes(json.load(f))
    except (OSError, ValueError) as exc:
        if code == 0:  # unknown whether it skipped: never a pass
            _skip(skip_file, [f"its --result-json could not be read ({exc})"])
        return code
    skipped = [f"{e}: {why.get(e, 'skipped')}" for e, r in envs.items() if r.get("skipped")]
    # tox exits 1 when every env it was given was skipped, though none failed: a skip.
    if skipped and all(r.get("success") is True for r in envs.values()):
        _skip(skip_file, skipped)
        return 0
    return code


def _skip(path: str, reasons: list[str]) -> None:
    with open(path, "w", encoding="utf-8") as f:
        f.write("tox skipped " + "; ".join(reasons) + "\n")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
