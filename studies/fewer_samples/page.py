"""The fewer-samples study's page for the documentation (`docgen` finds it): each registration with its claims, arms
and result (`page_tables.result_section`), the verdict, and the SPO headline block of docs/fewer_samples.md."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from docgen.cells import cell, code, f2, verdict
from docgen.page import Page, provenance, study_figures
from docgen.schema import ESTIMATE, NUMBER, check
from docgen.sources import ROOT, STUDIES, cpu_hours, read_json, read_records, read_toml
from studies.fewer_samples.page_tables import diff_cell, factor_cell, main_runs, result_section

TITLE = "Fewer samples per prompt (SPO)"
RESULT = STUDIES / "fewer_samples" / "results" / "fewer_samples.json"
OPT_TEXT = (str, type(None))
SHAPE = {
    "date?": str,
    "partial?": (str, bool, type(None)),
    "amendments?": list,
    "claims": {
        "*": {"verdict?": OPT_TEXT, "goal?": OPT_TEXT, "arm?": OPT_TEXT, "axis?": OPT_TEXT, "by_pool": {"*": dict}}
    },
    "by_pool": {
        "*": {
            "complete?": bool,
            "compute": {"table": {"*": {"tokens?": ESTIMATE, "lr?": (NUMBER, type(None))}}, "axes": {"*": dict}},
            "equal_tokens": {"best_uniform": str, "budget_tokens": NUMBER, "arms": {"*": dict}},
        }
    },
}
"""What the page publishes of a result (`docgen.schema`): every claim with its pools (a claim without them is an
error, never a verdict with no rows), every pool's tables."""


def page() -> Page:
    """The first registration's claims and result, then each later registration (`registrations/*.toml` with a
    `name`: its result in `results/<name>/`), registered or with its result; the SPO headline block of
    docs/fewer_samples.md (`spo`)."""
    study = "fewer_samples"
    regs = STUDIES / study / "registrations"
    page = Page(study, TITLE, 6, figures=study_figures(study))
    page.blocks = {"spo": headline(link="results/fewer_samples.md"), "spo-verdict": spo_verdict()}
    page.by_strategy = by_strategy()
    reg, result, body = _registration(regs / "preregistration.toml", "## Registration")
    page.body = body
    main = _main_runs(reg)
    later = [(f, read_toml(f)) for f in sorted(regs.glob("*.toml")) if f.name != "preregistration.toml"]
    if not result.exists():
        runs, _ = read_records(study)
        phases = [r.get("phase") for r in runs.values()]
        done = f" ({phases.count('sweep')} lr-sweep runs and {phases.count('main')} of {main} main runs recorded)"
        page.verdict = (
            f"Registered, runs in progress{done if runs else ''}: no result yet, and nothing here claims that SPO wins."
        )
        page.status = "info"
        page.updated = ""
        return page
    res = read_json(result)
    check(res, SHAPE)
    runs, results = read_records(study)
    page.provenance = provenance(study, runs, results)
    page.cost = cpu_hours(runs)
    page.updated = str(res.get("date", ""))
    page.body = result_section(res, main) + page.body
    claims = {fig: c for fig, c in res.get("claims", {}).items() if c.get("verdict")}
    interim = f"Interim ({main_runs(res)} of {main} main runs recorded); on the seeds so far: "
    page.verdict = (interim if res.get("partial") else "") + (_verdicts(claims) or "Results recorded; see the tables.")
    first = next(iter(claims.values()), {}).get("verdict")
    page.status = "info" if res.get("partial") else {"met": "success", "missed": "failure"}.get(first or "", "info")
    for path, later_reg in later:
        if not later_reg.get("name") or later_reg["name"] == study:  # it would read and write the first one's result
            raise ValueError(f"{path}: a later registration needs a name of its own (its results/<name>/ folder)")
        name = str(later_reg["name"])
        _, later_result, body = _registration(path, f"## Later registration: `{name}`")
        page.body += ["", *body, ""]
        runs, results = read_records(study, name)
        planned = _main_runs(later_reg)
        if not later_result.exists():
            phases = [r.get("phase") for r in runs.values()]
            page.body += [
                f"Registered; {phases.count('sweep')} lr-sweep runs and {phases.count('main')} of {planned} main runs "
                "recorded: no result yet.",
            ]
            page.verdict += f" `{name}`: registered, no result yet."
            continue
        later_res = read_json(later_result)
        check(later_res, SHAPE)
        page.body += result_section(later_res, planned, level="###")
        page.provenance += provenance(study, runs, results)
        h, n, timed = cpu_hours(runs)
        page.cost = (page.cost[0] + h, page.cost[1] + n, page.cost[2] + timed) if page.cost else (h, n, timed)
        got = {fig: c for fig, c in later_res.get("claims", {}).items() if c.get("verdict")}
        state = f"interim ({main_runs(later_res)} of {planned} main runs)" if later_res.get("partial") else "final"
        page.verdict += f" `{name}`, {state}: {_verdicts(got) or 'no verdict yet.'}"
    return page


def _registration(path: Path, heading: str) -> tuple[dict[str, Any], Path, list[str]]:
    """A registration of the study: its content, where its result goes and its section (file, date,
    code, pools, seeds, budget, claims with goals, arms)."""
    text = path.read_text()
    reg = read_toml(path)
    name = reg.get("name")
    result = STUDIES / "fewer_samples" / "results" / (f"{name}/{name}.json" if name else "fewer_samples.json")
    written = re.search(r"Written (\d{4}-\d{2}-\d{2})", text)
    inst = reg.get("instrument", {})
    pools = [str(p).partition("=") for p in inst.get("pools", [])]
    body = [
        heading,
        "",
        f"`{path.relative_to(ROOT).as_posix()}`"
        + (f", written {written.group(1)}" if written else "")
        + f", before any of its runs; code commit `{str(reg.get('code', ''))[:10]}`. Pools "
        + ", ".join(f"`{n}`" + (f" ({code(spec)})" if spec else "") for n, _, spec in pools)
        + f"; {len(inst.get('seeds', []))} paired seeds ({_span(inst.get('seeds', []))}); every arm to "
        f"{inst.get('token_budget', 0):,} generated tokens.",
        "",
        "| figure | arm | goal |",
        "|---|---|---|",
        *[f"| {c['figure']} | {claim_arm(c)} | {cell(c.get('goal', ''))} |" for c in reg.get("claim", [])],
        "",
        "| arm | spec |",
        "|---|---|",
        *[f"| `{a.split('=', 1)[0]}` | {code(a.split('=', 1)[1])} |" for a in inst.get("arms", [])],
    ]
    for a in reg.get("amendment", []):  # `study.check_amendments`
        stops = ", ".join(f"`{arm}`" for arm in a.get("stop", []))
        body += ["", f"**Amendment of {a.get('date')}** (after runs began): stops {stops}. {cell(a.get('why', ''))}"]
    return reg, result, body


def _main_runs(reg: dict[str, Any]) -> int:
    """A registration's main runs: every arm no dated amendment stopped, on every pool with every seed."""
    inst = reg.get("instrument", {})
    gone = {arm for a in reg.get("amendment", []) for arm in a.get("stop", [])}
    arms = [a for a in inst.get("arms", []) if a.partition("=")[0].strip() not in gone]
    return len(arms) * len(inst.get("pools", [])) * len(inst.get("seeds", []))


def _span(seeds: list[int]) -> str:
    return f"{min(seeds)}-{max(seeds)}" if seeds else "none"


def _verdicts(claims: dict[str, Any]) -> str:
    return " ".join(
        f"{fig}{' (' + c['arm'] + ')' if c.get('arm') else ''}: {c['verdict']}{claim_span(c)}."
        for fig, c in claims.items()
    )


def claim_arm(claim: dict[str, Any]) -> str:
    """A registered claim's arm cell: the arm, or for a twin claim (`analysis.twins`) the best uniform arm's twin."""
    return f"`{claim['arm']}`" if "arm" in claim else f"the best uniform arm's `{claim['twin']}` twin"


def claim_span(claim: dict[str, Any]) -> str:
    """ " (0.78-1.38 over 4 pools)": the range of a claim's per-pool factors, empty when no pool has one."""
    vals = [p["value"] for p in (claim.get("by_pool") or {}).values() if isinstance(p.get("value"), int | float)]
    if not vals:
        return ""
    return f" ({f2(min(vals))}-{f2(max(vals))} over {len(vals)} pools)" if len(vals) > 1 else f" ({f2(vals[0])})"


def headline(link: str, arm: str = "spo-64") -> list[str]:
    """The study's headline for docs/fewer_samples.md: per pool the registered arm's tokens factor and its accuracy
    at the token budget against the best uniform arm, labelled interim until every registered run is in."""
    if not RESULT.exists():
        return [f"No result yet: the registered runs are in progress ([the study]({link}))."]
    res = read_json(RESULT)
    check(res, SHAPE)
    rows = [
        f"| pool | best uniform arm (tokens) | `{arm}` tokens factor [90% t] | seeds | `{arm}` accuracy at the budget "
        "minus the best uniform arm's [90%] |",
        "|---|---|---|---|---|",
    ]
    for pool, f in res.get("by_pool", {}).items():
        row = f["compute"]["table"].get(arm, {})
        rows.append(
            f"| `{pool}` | `{f['compute']['axes']['tokens']['best_uniform']}` | {factor_cell(row.get('tokens', {}))} | "
            f"{len(row.get('tokens', {}).get('seeds') or [])} | {diff_cell(f['equal_tokens']['arms'].get(arm, {}))} "
            f"(vs `{f['equal_tokens']['best_uniform']}`) |"
        )
    got = main_runs(res)
    claims = "; ".join(f"{k}: {c['verdict']}" for k, c in res.get("claims", {}).items() if c.get("verdict"))
    status = (
        f"**Interim**: {got} main runs of the registered ones are in (the pools listed, the seeds counted); this is "
        f"not the registered verdict. On the runs so far: {claims}."
        if res.get("partial")
        else f"Registered verdicts: {claims}."
    )
    return rows + ["", status + f" Every arm, C2/C2g, V1 and the controls: [the study's page]({link})."]


def spo_verdict() -> list[str]:
    """SPO in one sentence (the README, docs/which-sampler.md): the testbed's registered arm per pool against the best
    GRPO batch shape, its registered verdicts, and the SmolLM2 registration's L1 (`llm_convergence`'s `llm_spo`)."""
    res = read_json(RESULT)
    c1 = res["claims"]["C1"]
    wins = [p for p, e in c1["by_pool"].items() if (e.get("value") or 0) > 1]
    verdicts = ", ".join(f"{k} {c['verdict']}" for k, c in res["claims"].items() if c.get("verdict"))
    l1 = read_json(STUDIES / "llm_convergence" / "results" / "llm_spo" / "llm_spo.json")["headline"]["L1"]
    return [
        f"The opposite bet, one sample per prompt with a tracked baseline (SPO, `--strategy spo`), needs fewer tokens "
        f"than the best GRPO batch shape on {len(wins)} testbed pools of {len(c1['by_pool'])} (short answers) and "
        "more on the rest, "
        f"against registered goals it did not reach ({verdicts}); on SmolLM2 (answers of a few tokens) it reads "
        f"{factor_cell(l1)} on tokens "
        f"against GRPO-n4 at the same samples a step, against its registered {l1['goal'].split(' (')[0]}: "
        f"{verdict(l1, l1['goal'])} ([Fewer samples](fewer_samples.md))."
    ]


def by_strategy() -> dict[str, list[str]]:
    """Each strategy's arms in the first registration (the head of the arm's spec) with their tokens factor per pool
    against the best uniform arm of the grid: the rows of the strategy pages."""
    if not RESULT.exists():
        return {}
    res = read_json(RESULT)
    reg = read_toml(STUDIES / "fewer_samples" / "registrations" / "preregistration.toml")
    specs = dict(a.split("=", 1) for a in reg.get("instrument", {}).get("arms", []))
    pools = res.get("by_pool", {})
    refs = ", ".join(f"`{f['compute']['axes']['tokens']['best_uniform']}` on `{p}`" for p, f in pools.items())
    head = [
        "### Fewer samples per prompt",
        "",
        f"Tokens to the same held-out accuracy against the best uniform arm of a grid over n and prompts per step "
        f"({refs}), 90% t-interval, pre-registered; above 1 = fewer tokens ([the study](results/fewer_samples.md)).",
        "",
        "| arm | spec | " + " | ".join(f"`{p}`" for p in pools) + " |",
        "|---|---|" + "---|" * len(pools),
    ]
    out: dict[str, list[str]] = {}
    for arm, spec in specs.items():
        cells = [factor_cell(f["compute"]["table"].get(arm, {}).get("tokens", {})) for f in pools.values()]
        out.setdefault(spec.split("|")[0].split(":")[0].strip(), list(head)).append(
            f"| `{arm}` | {code(spec)} | " + " | ".join(cells) + " |"
        )
    return out
