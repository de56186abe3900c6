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


def test_a_misspelled_hook_is_a_usage_error_naming_it(tmp_path):
    install(
        tmp_path,
        "memotest_typo",
        textwrap.dedent("""
            from memotest.hookspecs import hookimpl

            @hookimpl
            def memotest_reprot(summary, config):
                pass
        """),
    )
    (tmp_path / "memotest.toml").write_text('[targets.a]\ncommand = "touch ran"\n')
    env = env_with(tmp_path, "memotest_typo")
    for command in (["build"], ["explain", "a"], ["list"]):
        proc = memotest(*command, cwd=tmp_path, env=env)
        err = proc.stderr.decode()
        assert proc.returncode == 2, err
        assert err == (
            "memotest: plugin 'memotest_typo' defines memotest_reprot, which is not a "
            "memotest hook (did you mean memotest_report?)\n"
        )
    assert not (tmp_path / "ran").exists()


LATE = """
    import sys

    from memotest.hookspecs import hookimpl


    class Late:
        @hookimpl
        def memotest_addoption(self, parser, pluginmanager):
            print(f"late addoption {parser.prog}", file=sys.stderr)

        @hookimpl
        def memotest_configure(self, config):
            print("late configure", file=sys.stderr)


    @hookimpl
    def memotest_configure(config):
        config.pluginmanager.register(Late(), "late")


    @hookimpl
    def memotest_unconfigure(config):
        late = config.pluginmanager.get_plugin("late")
        print(f"unconfigure (late {'registered' if late else 'missing'})", file=sys.stderr)
"""


def test_a_plugin_registered_in_configure_gets_the_historic_hooks(tmp_path):
    install(tmp_path, "memotest_late", textwrap.dedent(LATE))
    (tmp_path / "memotest.toml").write_text('[targets.a]\ncommand = "true"\n')
    proc = memotest("build", cwd=tmp_path, env=env_with(tmp_path, "memotest_late"))
    err = proc.stderr.decode().splitlines()
    assert proc.returncode == 0, err
    # The parsers' addoption calls are replayed, then the configure call, then unconfigure.
    assert [line for line in err if line.startswith(("late", "unconfigure"))] == [
        "late addoption memotest build",
        "late addoption memotest explain",
        "late addoption memotest show",
        "late addoption memotest list",
        "late configure",
        "unconfigure (late registered)",
    ]


def test_unconfigure_is_called_once_also_after_an_error(tmp_path):
    install(tmp_path, "memotest_late", textwrap.dedent(LATE))
    env = env_with(tmp_path, "memotest_late")
    (tmp_path / "memotest.toml").write_text('[targets.a]\ncommand = "true"\n')
    for command in (["build", "nosuch"], ["explain", "nosuch"]):
        proc = memotest(*command, cwd=tmp_path, env=env)
        err = proc.stderr.decode()
        assert proc.returncode == 2, err
        assert "no target" in err or "nosuch" in err
        assert err.count("unconfigure (late registered)") == 1
    (tmp_path / "memotest.toml").write_text('[targets.a]\ncommand = "true"\nbad = 1\n')
    proc = memotest("build", cwd=tmp_path, env=env)
    assert proc.returncode == 2
    assert proc.stderr.decode().count("unconfigure (late registered)") == 1
    # show, list and graph do not configure plugins, so they do not unconfigure them.
    (tmp_path / "memotest.toml").write_text('[targets.a]\ncommand = "true"\n')
    proc = memotest("list", cwd=tmp_path, env=env)
    assert proc.returncode == 0
    assert "configure" not in proc.stderr.decode()


def test_docs_list_every_hook_with_its_arguments():
    import inspect

    from memotest import hookspecs

    specs = {
        name: f"{name}({', '.join(inspect.signature(fn).parameters)})"
        for name, fn in vars(hookspecs).items()
        if name.startswith("memotest_")
    }
    listed = re.findall(
        r"^\| `(memotest_\w+\([^)]*\))`", (REPO / "docs" / "plugins.md").read_text(), re.M
    )
    assert sorted(listed) == sorted(specs.values())
    for name, fn in vars(hookspecs).items():
        if name.startswith("memotest_"):
            assert "config" in inspect.signature(fn).parameters or name == "memotest_addoption"
            assert re.search(r"Example[^:]*::", fn.__doc__ or ""), name


def test_a_plugin_adds_default_ignore_patterns(tmp_path):
    install(
        tmp_path,
        "memotest_cachedir",
        textwrap.dedent("""
            from memotest.hookspecs import hookimpl

            @hookimpl
            def memotest_ignore(config):
                return ["**/.tool_cache/**"]
        """),
    )
    (tmp_path / ".tool_cache").mkdir()
    (tmp_path / ".tool_cache" / "state").write_text("1")
    (tmp_path / "src").write_text("1")
    (tmp_path / "memotest.toml").write_text('[targets.a]\ncommand = "cat .tool_cache/state src"\n')
    env = env_with(tmp_path, "memotest_cachedir")
    assert memotest("build", cwd=tmp_path, env=env).returncode == 0
    (tmp_path / ".tool_cache" / "state").write_text("2")
    proc = memotest("build", cwd=tmp_path, env=env)
    assert "(cached) PASSED a" in proc.stdout.decode()
    # Without the plugin the cache is an input like any file.
    bare = env_with(tmp_path, "")
    assert memotest("build", "--force", cwd=tmp_path, env=bare).returncode == 0
    (tmp_path / ".tool_cache" / "state").write_text("3")
    proc = memotest("build", cwd=tmp_path, env=bare)
    assert "[1/1] PASSED a" in proc.stdout.decode()


def test_pytest_cache_stays_ignored_by_default():
    from memotest.load.config import Settings

    assert "**/.pytest_cache/**" in Settings().ignore
