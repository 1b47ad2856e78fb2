"""The results page of a study with a `summary.json` of registered figures (`summary_page`): the verdict in one line
from its headline figures, each figure with its interval, goal and verdict against the goal, a later registration's
figures in their own table, and the checks (pre-registered, paired seeds, the shipped testbed, deviations, re-runs,
the regeneration test).

Sources: `studies/<study>/results/summary.json` (the headline figures: value, intervals, goal, arm, pre-registration
flag), the result JSONs beside it (their meta: date, machine, git commit, command) and `results/records.jsonl.gz`
(the runs: seconds, for the cost)."""

from __future__ import annotations

from typing import Any

from docgen import schema
from docgen.cells import cell, f2, threshold, verdict, with_interval
from docgen.page import Page, provenance, study_figures
from docgen.sources import ROOT, STUDIES, cpu_hours, later_registrations, read_json, read_records


def read_summary(study: str, registration: str | None = None) -> dict[str, Any]:
    """A study's summary.json (a later registration's with `registration`), its figures checked (`schema.summary`):
    a figure without its value or pools, or one of a type the study does not write, is an error naming the field."""
    summary = read_json(STUDIES / study / "results" / (registration or "") / "summary.json")
    schema.summary(summary)
    return summary


def unfinished(*entries: dict[str, Any]) -> bool:
    """A figure whose registered runs are not all in (`status` partial or unmeasured, on the entry or its pool): it
    gets an interim reading, never a verdict. No status (older studies) or `complete` is finished."""
    return any(x.get("status") not in (None, "complete") for x in entries)


def summary_table(summary: dict[str, Any], keys: list[str]) -> list[str]:
    lines = [
        "| figure | what | arm | pool | value [90% interval] | goal | verdict | pre-registered |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for k in keys:
        e = summary[k]
        pools = e.get("pools") or {None: e}
        for pool, p in pools.items():
            if p.get("value") is None and "ratios" not in p:
                continue
            pre = p.get("preregistered", e.get("preregistered"))
            pre_text = "yes" if pre else ("no" if pre is False else "not recorded")
            if p.get("best_after_the_fact") or "after the fact" in str(e.get("what", "")):
                pre_text = "no: picked after the fact" if not pre else pre_text
            missing = p.get("missing") or e.get("missing") or "registered runs missing"
            said = f"interim: {cell(missing)}" if unfinished(e, p) else verdict(p, e.get("goal"), pool)
            lines.append(
                f"| {k} | {cell(e.get('what', ''))} | {p.get('arm') or e.get('arm') or ''} | "
                f"{pool or e.get('pool', '')} | "
                f"{with_interval(p)} | {cell(e.get('goal') or 'none')} | {said} | "
                f"{pre_text} |"
            )
    return lines


def headline_line(summary: dict[str, Any], key: str) -> tuple[str, bool | None]:
    """One sentence for figure `key`, and whether it met its goal (None: no goal)."""
    e = summary[key]
    pools = e.get("pools") or {None: e}
    rows = {p: v for p, v in pools.items() if v.get("value") is not None}
    verdicts = {p: verdict(v, e.get("goal"), p) for p, v in rows.items()}
    has_goal = any(threshold(e.get("goal"), p) for p in rows)
    met = [p for p, v in verdicts.items() if v.startswith("**met")]
    arm = next((v.get("arm") for v in rows.values() if v.get("arm")), e.get("arm"))
    what = e.get("what", "").split(",")[0]
    label = f"{key} ({what}{', ' + arm if arm else ''})"
    if not rows:  # registered, runs under way: nothing to read yet
        return f"{label}: no result yet ({e.get('status') or 'runs in progress'}).", None
    vals = [v["value"] for v in rows.values()]
    span = f"{f2(min(vals))}-{f2(max(vals))}" if len(vals) > 1 else with_interval(next(iter(rows.values())))
    if unfinished(e, *pools.values()):  # registered runs still to come: an interim reading, never a verdict
        missing = e.get("missing") or next((v["missing"] for v in pools.values() if v.get("missing")), "runs missing")
        return f"{label}: interim {span} ({missing}).", None
    where = "" if None in rows else f" on {len(met)} of {len(rows)} pools" if met else f" on all {len(rows)} pools"
    if not has_goal:
        return f"{label}: {span}.", None
    state = "missed" if not met else "met" if "**met**" in verdicts.values() else "met on the point estimate"
    return f"{label}: {state}{where} ({span}; goal {e.get('goal')}).", bool(met)


def summary_page(study: str, title: str, order: int, headline: tuple[str, ...] = ()) -> Page:
    """The page of a study with a `summary.json` of registered figures: its verdict reads the figures `headline`
    names (the first decides its colour), then every figure with its interval, goal and verdict; a later
    registration's own `results/<name>/summary.json` joins as figures `K[name]`."""
    summary = read_summary(study)
    runs, results = read_records(study)
    page = Page(study, title, order, figures=study_figures(study), provenance=provenance(study, runs, results))
    page.cost = cpu_hours(runs)
    for name in later_registrations(study):  # its own folder: figures `K[name]`, its runs in the provenance
        summary |= {f"{k}[{name}]": e for k, e in read_summary(study, name).items()}
        later_runs, later_results = read_records(study, name)
        page.provenance += provenance(study, later_runs, later_results)
        page.cost = tuple(a + b for a, b in zip(page.cost, cpu_hours(later_runs), strict=True))
        results |= {k if k not in results else f"{name}/{k}": v for k, v in later_results.items()}
    dates = [str(p["date"]) for p in page.provenance if p.get("date")]
    dates += [str(e["date"]) for e in summary.values() if e.get("date")]
    page.updated = max(dates) if dates else ""
    sentences, met = [], []
    for key in headline:
        if key in summary:
            s, m = headline_line(summary, key)
            sentences.append(s)
            met.append(m)
    page.verdict = " ".join(sentences)
    first = next((m for m in met if m is not None), None)
    page.status = "info" if first is None else ("success" if first else "failure")
    main = [k for k in summary if "[" not in k and summary[k].get("what")]
    later = [k for k in summary if "[" in k]
    page.body += ["## Result", "", *summary_table(summary, main)]
    if later:
        page.body += [
            "",
            "### Later registrations",
            "",
            "Each bracketed family is its own registration, read against its own goal.",
            "",
            *summary_table(summary, later),
        ]
    page.checks += summary_checks(study, summary, results)
    return page


def summary_checks(study: str, summary: dict[str, Any], results: dict[str, dict]) -> list[tuple[str, str]]:
    checks = []
    pre = [
        p.get("preregistered", e.get("preregistered"))
        for e in summary.values()
        for p in (e.get("pools") or {None: e}).values()
        if p.get("value") is not None
    ]
    if any(x is not None for x in pre):
        checks.append(
            ("figures read against a registration committed before the runs", f"{sum(map(bool, pre))} of {len(pre)}")
        )
    seeds = {
        len(p["per_seed"])
        for e in summary.values()
        for p in (e.get("pools") or {None: e}).values()
        if p.get("per_seed")
    }
    if seeds:
        checks.append(("paired seeds per figure", ", ".join(map(str, sorted(seeds)))))
    testbeds = [
        r["meta"]["testbed"] for r in results.values() if isinstance((r.get("meta") or {}).get("testbed"), dict)
    ]
    if testbeds:
        shipped = sum(t.get("sha256") == t.get("shipped_sha256") for t in testbeds)
        checks.append(("policy is the shipped warm start (sha256)", f"{shipped} of {len(testbeds)} results"))
    devs = [d for r in results.values() for d in (r.get("deviations") or [])]
    if any("deviations" in r for r in results.values()):
        checks.append(("deviations from the registration", "; ".join(map(str, devs)) or "none recorded"))
    reruns = [n for n in results if n.endswith("_rerun")]
    if reruns:
        checks.append(("independent re-run with other seeds", ", ".join(f"`{n}`" for n in reruns)))
    test = STUDIES / study / "tests" / "test_regenerate.py"
    checks.append(
        ("committed results regenerate from the records", f"`{test.relative_to(ROOT)}`" if test.exists() else "no test")
    )
    return checks
