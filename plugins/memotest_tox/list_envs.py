"""Lists a tox config file's envs, as tox itself reads them: ``python -m
memotest_tox.list_envs PATH``, run by :func:`memotest_tox.plugin.list_envs` in a process of
its own, so that tox's logging setup stays out of memotest's.

Prints, after a marker line, a JSON object: ``envs`` (the active envs in tox's order),
``depends`` (each env's ``depends``) and ``root`` (tox's root), or ``error`` (what tox
raised reading the file).
"""

from __future__ import annotations

import json
import sys

MARK = "@@memotest-tox@@"


def read(path: str) -> dict[str, object]:
    from tox.config.cli.parse import get_options
    from tox.session.state import State

    args = ["-c", path, "l"]
    state = State(get_options(*args), args)
    envs = list(state.envs.iter(only_active=True))
    depends: dict[str, list[str]] = {}
    for env in envs:
        try:
            depends[env] = list(state.envs[env].conf["depends"].envs)
        except Exception:  # an env tox cannot resolve has no known dependencies
            depends[env] = []
    return {"envs": envs, "depends": depends, "root": str(state.conf.core["tox_root"])}


def main() -> None:
    try:
        out = read(sys.argv[1])
    except BaseException as exc:  # tox exits (SystemExit) on a broken config: report it
        out = {"error": f"{type(exc).__name__}: {exc}"}
    sys.stdout.write("\n" + MARK + json.dumps(out))


if __name__ == "__main__":
    main()
