"""The plugin API: the documented example plugin runs, and broken plugins are named."""

from __future__ import annotations

import json
import os
import re
import textwrap
from pathlib import Path

from conftest import REPO, memotest


def example_plugin() -> str:
    text = (REPO / "docs" / "plugins.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    return next(b for b in blocks if "memotest_load_targets" in b)


def env_with(tmp_path: Path, plugins: str) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = f"{tmp_path / 'site'}:{env.get('PYTHONPATH', '')}"
    env["MEMOTEST_PLUGINS"] = plugins
    return env


def install(tmp_path: Path, name: str, code: str) -> None:
    site = tmp_path / "site"
    site.mkdir(exist_ok=True)
    (site / f"{name}.py").write_text(code)


def test_documented_example_plugin_loads_runs_and_reports(tmp_path):
    install(tmp_path, "memotest_jsonfile", example_plugin())
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "targets.json").write_text(json.dumps({"hello": "echo hi", "count": "ls"}))
    env = env_with(tmp_path, "memotest_jsonfile")
    proc = memotest("build", "--from", "json", cwd=proj, env=env)
    out = proc.stdout.decode()
    assert proc.returncode == 0, out + proc.stderr.decode()
    assert "PASSED hello" in out and "slowest:" in out
    # Auto-detected without --from, and cached the second time.
    proc = memotest("build", cwd=proj, env=env)
    assert proc.returncode == 0
    assert "(cached) PASSED hello" in proc.stdout.decode()


def test_documented_plugin_reports_bad_json_with_the_line(tmp_path):
    install(tmp_path, "memotest_jsonfile", example_plugin())
    (tmp_path / "targets.json").write_text('{\n  "a": "true",\n  oops\n}')
    proc = memotest("build", cwd=tmp_path, env=env_with(tmp_path, "memotest_jsonfile"))
    assert proc.returncode == 2
    assert "targets.json:3: targets.json:" in proc.stderr.decode()


def test_a_plugin_that_raises_is_named(tmp_path):
    install(
        tmp_path,
        "memotest_boom",
        textwrap.dedent("""
            from memotest.hookspecs import hookimpl

            @hookimpl
            def memotest_report(summary, config):
                raise KeyError("x")
        """),
    )
    (tmp_path / "memotest.toml").write_text('[targets.a]\ncommand = "true"\n')
    proc = memotest("build", cwd=tmp_path, env=env_with(tmp_path, "memotest_boom"))
    err = proc.stderr.decode()
    assert proc.returncode == 2
    assert "plugin 'memotest_boom' failed in memotest_report: KeyError" in err
    assert "Traceback" not in err


def test_a_plugin_that_fails_to_import_is_left_out(tmp_path):
    dist = tmp_path / "site" / "broken_plugin-1.0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: broken-plugin\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[memotest]\nbroken = memotest_not_there.plugin\n")
    (tmp_path / "memotest.toml").write_text('[targets.a]\ncommand = "true"\n')
    env = env_with(tmp_path, "")
    proc = memotest("build", cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stderr.decode()
    assert "plugin 'broken'" in proc.stderr.decode() and "left out" in proc.stderr.decode()
    proc = memotest("build", "--from", "broken", cwd=tmp_path, env=env)
    assert proc.returncode == 2
    assert "--from broken: the plugin failed to load" in proc.stderr.decode()
