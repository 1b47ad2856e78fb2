"""The results pages, generated from the studies' committed JSON (`python -m docgen`): no number is typed by hand.

One page per study (`docs/results/<study>.md`) in one format: the verdict in one line, the result with its interval
per registered figure, a table of checks, the figures with the command that regenerates each, and the provenance of
every result (date, code commit, machine, command, runs, cost in CPU-hours where the records carry run seconds).
`docs/results/index.md` adds the cross-study answer to "does adaptive sampling pay?" (`pays_table`, also written
into README.md between its `results` markers) and the compute-to-target figure (`docgen.figures`).

Sources, per study: `studies/<study>/results/summary.json` (the headline figures: value, intervals, goal, arm,
pre-registration flag), the result JSONs beside it (their meta: date, machine, git commit, command) and
`results/records.jsonl.gz` (the runs: seconds, for the cost). A study whose results are not in yet (no result JSON)
gets a page that says so, from its registration.
"""

from __future__ import annotations

from typing import Any

from docgen.cells import cell, code, f2, threshold, verdict, with_interval
from docgen.page import Page, provenance, study_figures
from docgen.results_meta import GENERATED, HEADLINE, ORDER, POOLS, TITLES
from docgen.sources import ROOT, STUDIES, cpu_hours, later_registrations, read_json, read_records
from docgen.study_pages import allocators_sim_page, belief_quality_page, fewer_samples_page


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


def summary_page(study: str) -> Page:
    """A study with a `summary.json` of registered figures (compute_to_target, convergence, llm_convergence)."""
    summary = read_json(STUDIES / study / "results" / "summary.json")
    runs, results = read_records(study)
    page = Page(study, figures=study_figures(study), provenance=provenance(study, runs, results))
    page.cost = cpu_hours(runs)
    for name in later_registrations(study):  # its own folder: figures `K[name]`, its runs in the provenance
        summary |= {
            f"{k}[{name}]": e for k, e in read_json(STUDIES / study / "results" / name / "summary.json").items()
        }
        later_runs, later_results = read_records(study, name)
        page.provenance += provenance(study, later_runs, later_results)
        page.cost = tuple(a + b for a, b in zip(page.cost, cpu_hours(later_runs), strict=True))
        results |= {k if k not in results else f"{name}/{k}": v for k, v in later_results.items()}
    dates = [str(p["date"]) for p in page.provenance if p.get("date")]
    dates += [str(e["date"]) for e in summary.values() if e.get("date")]
    page.updated = max(dates) if dates else ""
    sentences, met = [], []
    for key in HEADLINE.get(study, ()):
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
    if study == "compute_to_target":
        page.body += ["", *arms_table()]
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


def pool_table(pool: str) -> dict[str, dict[str, Any]] | None:
    path = STUDIES / "compute_to_target" / "results" / f"compute_to_target_{pool}.json"
    if not path.exists():
        return None
    return read_json(path)["by_pool"][pool]["compute"]


def arms_table() -> list[str]:
    """Every arm's tokens factor against the best uniform arm, per pool (the compute-to-target figure's numbers)."""
    tables = {p: pool_table(p) for p in POOLS}
    tables = {p: t for p, t in tables.items() if t}
    if not tables:
        return []
    arms = list(dict.fromkeys(a for t in tables.values() for a in t["table"]))
    lines = [
        "### Every arm on tokens",
        "",
        "Tokens to target, the best uniform GRPO on that pool / the arm (above 1: fewer tokens than the best uniform "
        "arm), 90% t-interval over 9 paired seeds; the reference is "
        + ", ".join(f"`{t['axes']['tokens']['best_uniform']}` on `{p}`" for p, t in tables.items())
        + ".",
        "",
        "| arm | " + " | ".join(tables) + " |",
        "|---|" + "---|" * len(tables),
    ]
    for arm in arms:
        row = [with_interval(t["table"].get(arm, {}).get("tokens", {})) for t in tables.values()]
        lines.append(f"| `{arm}` | " + " | ".join(row) + " |")
    return lines


def pays_rows() -> list[dict[str, Any]]:
    """Per pool: the best uniform arm, MoPPS (the best deployable adaptive arm), Ada-Seq-balanced and the oracle
    ceiling (C0), each as tokens to target against the best uniform arm."""
    summary = read_json(STUDIES / "compute_to_target" / "results" / "summary.json")
    rows = []
    for pool in POOLS:
        t = pool_table(pool)
        if not t:
            continue
        c0 = summary.get("C0", {}).get("pools", {}).get(pool, {})
        rows.append(
            {
                "pool": pool,
                "reference": t["axes"]["tokens"]["best_uniform"],
                "mopps": t["table"].get("mopps", {}).get("tokens", {}),
                "seq": t["table"].get("seq-bal", {}).get("tokens", {}),
                "oracle": c0,
            }
        )
    return rows


def pays_table(link: str = "results/index.md") -> list[str]:
    """The small "does adaptive sampling pay?" table (README and the results overview)."""
    rows = pays_rows()
    lines = [
        "| pool | best uniform GRPO | best adaptive arm (MoPPS) | Ada-Seq-balanced (`seq`) | oracle ceiling |",
        "|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| `{r['pool']}` | `{r['reference']}` = 1 | {with_interval(r['mopps'])} | {with_interval(r['seq'])} | "
            f"{with_interval(r['oracle'])} |"
        )
    lo = min(r["mopps"]["value"] for r in rows)
    hi = max(r["mopps"]["value"] for r in rows)
    seq_hi = max(r["seq"]["value"] for r in rows)
    llm = read_json(STUDIES / "llm_convergence" / "results" / "summary.json").get("L1", {})
    return lines + [
        "",
        f"Tokens to reach the same held-out accuracy, relative to the best uniform GRPO (above 1 = fewer tokens; 90% "
        f"interval, 9 paired seeds, pre-registered). **Verdict: per generated token, no adaptive allocator beat plain "
        f"GRPO** (best {f2(lo)}-{f2(hi)}; Ada-Seq-balanced at most {f2(seq_hi)}); per RL step Ada-Seq learns about "
        f"2x faster. On a real model (SmolLM2-135M-Instruct, {len(llm.get('per_seed', []))} seeds) "
        f"{llm.get('arm', '')} reads {with_interval(llm)} on tokens against GRPO-n4. [Every study]({link}).",
    ]


BUILDERS = {
    "compute_to_target": lambda: summary_page("compute_to_target"),
    "convergence": lambda: summary_page("convergence"),
    "allocators_sim": allocators_sim_page,
    "belief_quality": belief_quality_page,
    "llm_convergence": lambda: summary_page("llm_convergence"),
    "fewer_samples": fewer_samples_page,
}
"""Each study's page, in `ORDER`."""


def index_page() -> str:
    lines = [
        GENERATED,
        "",
        "# Results",
        "",
        "What the library's strategies buy, measured. Every number on these pages is generated from the studies' "
        "committed JSON by `python -m docgen`, and a test fails when a committed page differs from what that command "
        "writes. Each study lives in `studies/<name>/` with its registration, analysis, records and write-up.",
        "",
        "## Does adaptive sampling pay?",
        "",
        *pays_table(link="#studies"),
        "",
        "![compute to target](img/compute_to_target_tokens.png)",
        "",
        "`python -m docgen` draws this figure from `studies/compute_to_target/results/compute_to_target_<pool>.json` "
        "(the study's own figures regenerate with `python -m studies.compute_to_target.regenerate`).",
        "",
        "## Studies {#studies}",
        "",
        "| study | verdict | last updated |",
        "|---|---|---|",
    ]
    for study in ORDER:
        p = BUILDERS[study]()
        lines.append(f"| [{TITLES[study]}]({study}.md) | {cell(p.verdict)} | {p.updated or 'running'} |")
    lines += [
        "",
        "Speed and engine benchmarks (one machine, one thing timed each): [Speed and engines](speed.md).",
    ]
    return "\n".join(lines) + "\n"


def speed_page() -> str:
    """The speed and engine goals (`benchmarks/results/summary.json`), each with its command and date."""
    summary = read_json(ROOT / "benchmarks" / "results" / "summary.json")
    lines = [
        GENERATED,
        "",
        "# Speed and engine benchmarks",
        "",
        "Each benchmark times one thing on one machine (`python -m benchmarks.NAME`, results under "
        "`benchmarks/results/` with the command, machine and date of each); the write-up with the conditions of "
        "every measurement is [Speed and engines: notes](../benchmarks.md).",
        "",
        "| goal | what | measured | target | verdict | command | date |",
        "|---|---|---|---|---|---|---|",
    ]
    for key, e in summary.items():
        if not isinstance(e, dict) or e.get("value") is None:
            continue
        lines.append(
            f"| {key} | {cell(e.get('what', ''))} | {with_interval(e)} | {cell(e.get('goal', ''))} | "
            f"{verdict(e, e.get('goal'))} | {code(e.get('command', ''))} | {e.get('date', '')} |"
        )
    return "\n".join(lines) + "\n"


def benchmarks_index() -> str:
    """BENCHMARKS.md: an index of the results pages."""
    lines = [
        GENERATED,
        "",
        "# Benchmarks and studies",
        "",
        "The results live on the documentation site's Results pages (`mkdocs serve`, or the Markdown under "
        "`docs/results/`), generated from the studies' JSON by `python -m docgen`:",
        "",
        "| page | verdict |",
        "|---|---|",
    ]
    for study in ORDER:
        p = BUILDERS[study]()
        lines.append(f"| [{TITLES[study]}](docs/results/{study}.md) | {cell(p.verdict)} |")
    lines += [
        "| [Speed and engine benchmarks](docs/results/speed.md) | the goals P4-P8 with their commands and dates; notes "
        "in [docs/benchmarks.md](docs/benchmarks.md) |",
    ]
    return "\n".join(lines) + "\n"


def pages() -> dict[str, str]:
    """Every generated results file: repository path -> text."""
    out = {f"docs/results/{s}.md": BUILDERS[s]().render() for s in ORDER}
    out["docs/results/index.md"] = index_page()
    out["docs/results/speed.md"] = speed_page()
    out["BENCHMARKS.md"] = benchmarks_index()
    return out
