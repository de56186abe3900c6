"""The summary and the tables of ``benchmarks/replay_git.py``'s results (see its doc)."""

from __future__ import annotations

import re
import statistics
from collections import Counter

import replay

LANES = ("pytest", "j1", "j2", "testmon")
LABELS = {"pytest": "pytest", "j1": "memotest -j1", "j2": "memotest -j2", "testmon": "testmon"}
BUILDS = ("j1", "j2")
#: The kinds of changed file (replay.category) that tests may run: a commit that changed
#: none of them (docs, CI files, the changelog) should re-run nothing.
CODE = {"package code", "test code", "test data", "pytest config"}


def fmt(x: float | None, digits: int = 2) -> str:
    return "-" if x is None else f"{x:.{digits}f}"


def ran(build: dict) -> int:
    return build.get("ran", 0)


def commit_line(rev: dict) -> str:
    """The line printed as each commit is done."""
    parts = [f"  {rev['index']:>2} {rev['commit'][:8]} {rev['files_changed']:>4} files"]
    p = rev["pytest"]
    parts.append(f"pytest {p['wall']:5.1f}s cpu {p['cpu']:5.1f}")
    for k in BUILDS:
        b = rev[k]
        parts.append(
            f"-{k} {b['wall']:5.1f}s cpu {b['cpu']:5.1f} {ran(b):>2} ran/{b.get('cached', 0):>2} "
            "replayed"
        )
    t = rev["testmon"]
    parts.append(f"testmon {t['wall']:5.1f}s cpu {t['cpu']:5.1f} {t['tests_run']:>4} tests")
    dis = sum(len(rev["agreement"][k]["disagreements"]) for k in BUILDS)
    parts.append(f"disagree {dis} | load {rev['loadavg'][0]:.1f}")
    return " | ".join(parts)


def touched_code(rev: dict, project: replay.Project) -> bool:
    files = [f for v in rev["diff"].values() for f in v]
    return any(replay.category(f, project) in CODE for f in files)


def reason_kind(reason: str | None, project: replay.Project | None = None) -> str:
    """A re-run's first reason without the names and the counts, for counting: the kind
    of file (replay.category, or the hidden folder it is in, such as ``.hypothesis``) and
    what changed (``<lane>/src/x.py: the body of class C changed (and 2 more...)`` ->
    ``package code: the body of class changed``)."""
    text = reason or ""
    where = ""
    m = re.match(r"(/\S*?/(?:pytest|j1|j2|testmon))(/\S*)?: (.*)", text)
    if m:
        rel, text = (m.group(2) or "/").lstrip("/"), m.group(3)
        hidden = [part for part in rel.split("/") if part.startswith(".")]
        if hidden:
            where = hidden[0]
        elif project is not None:
            where = replay.category(rel, project) if rel else "the checkout's root"
    text = re.sub(r"\s*\(.*$|\s*\[.*$", "", text)
    text = re.sub(r"\b(class|function|method) \S+", r"\1", text)
    text = re.sub(r"<\w+>", "<code>", text).strip()
    return f"{where}: {text}" if where else text


def unexplained_reruns(build: dict) -> list[str]:
    """The reasons of the targets a build re-ran that had passed (a failed target re-runs
    at every build), the lane's path left out."""
    return [
        re.sub(r"/\S*?/(?:j1|j2)/", "", t.get("reason") or "")
        for t in build.get("targets", {}).values()
        if t["status"] != "cached" and not (t.get("reason") or "").startswith("last run failed")
    ]


def summarize(revs: list[dict], project: replay.Project | None = None) -> dict:
    """The figures after the first commit (a full run for every tool)."""
    rest = revs[1:]
    s: dict = {"commits": len(revs), "after_first": len(rest)}
    first = revs[0]
    s["first"] = {k: {"wall": first[k]["wall"], "cpu": first[k]["cpu"]} for k in LANES}
    for measure in ("wall", "cpu"):
        sums = {k: sum(r[k][measure] for r in rest) for k in LANES}
        s[measure] = {
            k: {
                "sum": round(sums[k], 2),
                "median": round(statistics.median([r[k][measure] for r in rest]), 3)
                if rest
                else None,
                "to_pytest": round(sums[k] / sums["pytest"], 3) if sums["pytest"] else None,
                "to_testmon": round(sums[k] / sums["testmon"], 3) if sums["testmon"] else None,
            }
            for k in LANES
        }
        for k in BUILDS:
            for other in ("pytest", "testmon"):
                s[measure][k][f"commits_below_{other}"] = sum(
                    1 for r in rest if r[k][measure] < r[other][measure]
                )
    for k in BUILDS:
        s[k] = {
            "replayed_entirely": sum(1 for r in rest if r[k].get("total") and ran(r[k]) == 0),
            "targets_run": sum(ran(r[k]) for r in rest),
            "targets": sum(r[k].get("total", 0) for r in rest),
            "reasons": dict(
                Counter(
                    reason_kind(t.get("reason"), project)
                    for r in rest
                    for t in r[k].get("targets", {}).values()
                    if t["status"] != "cached"
                ).most_common()
            ),
            "disagreements": [
                {"commit": r["commit"][:8], **d}
                for r in revs
                for d in r["agreement"][k]["disagreements"]
            ],
            "extra_failures": [
                {"commit": r["commit"][:8], **d}
                for r in revs
                for d in r["agreement"][k]["extra_failures"]
            ],
            "order": [
                {"commit": r["commit"][:8], **d} for r in revs for d in r["agreement"][k]["order"]
            ],
        }
        if project is not None:
            s[k]["reruns_without_code_change"] = [
                {"commit": r["commit"][:8], "files": [f for v in r["diff"].values() for f in v]}
                | {"ran": len(spurious), "reasons": sorted(spurious)[:5]}
                for r in rest
                if not touched_code(r, project)
                for spurious in [unexplained_reruns(r[k])]
                if spurious
            ]
    # The commits after the first by what -j2 re-ran: nothing, some targets, all of them.
    groups: dict[str, list[dict]] = {"none": [], "some": [], "all": []}
    for r in rest:
        n, total = ran(r["j2"]), r["j2"].get("total", 0)
        groups["none" if n == 0 else "all" if n == total else "some"].append(r)
    s["by_rerun"] = {
        g: {"commits": len(rs)}
        | {
            k: {m: round(statistics.median(r[k][m] for r in rs), 3) for m in ("wall", "cpu")}
            for k in LANES
        }
        for g, rs in groups.items()
        if rs
    }
    s["testmon_tests_run"] = sum(r["testmon"].get("tests_run", 0) for r in rest)
    s["failing_files_pytest"] = sorted({f for r in revs for f in r["pytest"]["failed"]})
    # Files failing under testmon and not in the pytest session (testmon runs its tests
    # under coverage's tracer), at how many commits.
    only = Counter(
        f for r in revs for f in set(r["testmon"]["failed"]) - set(r["pytest"]["failed"])
    )
    s["testmon_only_failures"] = dict(only)
    return s


def any_disagreement(results: dict) -> bool:
    return any(
        p["summary"][k]["disagreements"] for p in results["projects"].values() for k in BUILDS
    )


def print_tables(results: dict) -> None:
    log = replay.log
    for name, p in results["projects"].items():
        revs, s = p["revisions"], p["summary"]
        log(
            f"\n{name}: {s['commits']} commits "
            f"({revs[0]['commit'][:8]}..{revs[-1]['commit'][:8]}), "
            f"installed metadata {p['metadata_version']}; wall and CPU seconds; memotest: targets "
            "ran/replayed; testmon: tests run"
        )
        log(
            f"{'#':>2} {'commit':<8} {'files':>5} | {'pytest':>11} | {'memotest -j1':>20} | "
            f"{'memotest -j2':>20} | {'testmon':>16} | {'fail':>4} {'dis':>3} {'load':>4}"
        )
        for r in revs:
            cells = [f"{r['index']:>2} {r['commit'][:8]} {r['files_changed']:>5}"]
            cells.append(f"{r['pytest']['wall']:>5.1f} {r['pytest']['cpu']:>5.1f}")
            for k in BUILDS:
                b = r[k]
                cells.append(
                    f"{b['wall']:>5.1f} {b['cpu']:>5.1f} {ran(b):>3}/{b.get('cached', 0):<3}"
                )
            t = r["testmon"]
            cells.append(f"{t['wall']:>5.1f} {t['cpu']:>5.1f} {t['tests_run']:>4}")
            dis = sum(len(r["agreement"][k]["disagreements"]) for k in BUILDS)
            cells.append(f"{len(r['pytest']['failed']):>4} {dis:>3} {r['loadavg'][0]:>4.1f}")
            log(" | ".join(cells))
        k = s["after_first"]
        log(
            f"\n{name}, the {k} commits after the first: sum and median seconds per commit, "
            "ratios of the sums"
        )
        log(
            f"{'':<13} {'wall sum':>8} {'median':>6} {'cpu sum':>8} {'median':>6} | "
            f"{'/pytest wall':>12} {'cpu':>5} | {'/testmon wall':>13} {'cpu':>5}"
        )
        for lane in LANES:
            w, c = s["wall"][lane], s["cpu"][lane]
            log(
                f"{LABELS[lane]:<13} {w['sum']:>8.1f} {fmt(w['median']):>6} {c['sum']:>8.1f} "
                f"{fmt(c['median']):>6} | {fmt(w['to_pytest']):>12} {fmt(c['to_pytest']):>5} | "
                f"{fmt(w['to_testmon']):>13} {fmt(c['to_testmon']):>5}"
            )
        first = s["first"]
        log(
            "first commit (a full run, empty store): "
            + ", ".join(
                f"{LABELS[lane]} {first[lane]['wall']:.1f}s ({first[lane]['cpu']:.1f} cpu)"
                for lane in LANES
            )
        )
        log("medians per commit by what -j2 re-ran (wall / CPU seconds):")
        for g, row in s.get("by_rerun", {}).items():
            log(
                f"  {g + ' re-ran':<11} {row['commits']:>2} commits: "
                + ", ".join(
                    f"{LABELS[lane]} {row[lane]['wall']:.2f} / {row[lane]['cpu']:.2f}"
                    for lane in LANES
                )
            )
        for b in BUILDS:
            log(
                f"-{b}: replayed every target at {s[b]['replayed_entirely']} of {k} commits; ran "
                f"{s[b]['targets_run']} of {s[b]['targets']} targets; below pytest at "
                f"{s['wall'][b]['commits_below_pytest']} of {k} commits by wall "
                f"({s['cpu'][b]['commits_below_pytest']} by CPU), below testmon at "
                f"{s['wall'][b]['commits_below_testmon']} ({s['cpu'][b]['commits_below_testmon']} "
                "by CPU)"
            )
        log(f"testmon ran {s['testmon_tests_run']} tests over the {k} commits")
        if s["failing_files_pytest"]:
            log(
                "failing under one-process pytest at some commit (a failed target re-runs at "
                f"every build): {', '.join(s['failing_files_pytest'])}"
            )
        for f, count in s.get("testmon_only_failures", {}).items():
            log(f"  testmon failed {f} at {count} commits where one-process pytest passed it")
        for reason, count in list(s["j2"]["reasons"].items())[:8]:
            log(f"  -j2 re-runs {count:>4}: {reason}")
        for b in BUILDS:
            for d in s[b].get("reruns_without_code_change", []):
                log(
                    f"  -{b} re-ran {d['ran']} passing target(s) at {d['commit']}, which changed "
                    f"no package, test or pytest configuration file ({', '.join(d['files'][:4])}"
                    f"{', ...' if len(d['files']) > 4 else ''}): {'; '.join(d['reasons'])}"
                )
            for d in s[b]["disagreements"]:
                log(f"  DISAGREEMENT -{b} {d}")
            for d in s[b]["extra_failures"]:
                log(f"  note: -{b} failed where the file alone passed: {d}")
        for d in s["j1"]["order"]:
            log(f"  note: the pytest session and the file alone differ (order across files): {d}")
        log(f"disagreements: {sum(len(s[b]['disagreements']) for b in BUILDS)}")
