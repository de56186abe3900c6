"""Lists a tox config file's envs, as tox itself reads them: ``python -m
memotest_tox.list_envs [PATH]``, run by :func:`memotest_tox.plugin.list_envs` in a process
of its own, so that tox's logging setup stays out of memotest's. Without a path, tox finds
the file as ``tox`` does in the current folder and its parents (``tox.ini``, ``setup.cfg``,
``pyproject.toml``'s ``[tool.tox]``, ``tox.toml``), so every format tox reads works.

Prints, after a marker line, a JSON object: ``envs`` (the active envs in tox's order),
``depends`` (each env's ``depends``), ``root`` (tox's root) and ``config`` (the file tox
read), or ``error`` (what tox raised reading the file).
"""

from __future__ import annotations

import json
import sys

MARK = "@@memotest-tox@@"


def read(path: str | None) -> dict[str, object]:
    from tox.config.cli.parse import get_options
    from tox.session.state import State

    args = ["-c", path, "l"] if path else ["l"]
    state = State(get_options(*args), args)
    envs = list(state.envs.iter(only_active=True))
    depends: dict[str, list[str]] = {}
    for env in envs:
        try:
            depends[env] = list(state.envs[env].conf["depends"].envs)
        except Exception:  # an env tox cannot resolve has no known dependencies
            depends[env] = []
    return {
        "envs": envs,
        "depends": depends,
        "root": str(state.conf.core["tox_root"]),
        "config": str(state.conf.src_path),
    }


def main() -> None:
    try:
        out = read(sys.argv[1] if len(sys.argv) > 1 else None)
    except BaseException as exc:  # tox exits (SystemExit) on a broken config: report it
        out = {"error": f"{type(exc).__name__}: {exc}"}
    sys.stdout.write("\n" + MARK + json.dumps(out))


if __name__ == "__main__":
    main()
