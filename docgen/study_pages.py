"""The pages of the studies without a `summary.json` of registered figures: the simulated allocators, the belief's
quality, and the fewer-samples study (which says so while its registered runs are in progress)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

from docgen.cells import cell, code, f2
from docgen.fewer_samples import main_runs, result_section
from docgen.page import Page, provenance, study_figures
from docgen.sources import ROOT, STUDIES, cpu_hours, read_json, read_records


def allocators_sim_page() -> Page:
    study = "allocators_sim"
    res = read_json(STUDIES / study / "results" / "allocators_sim.json")
    runs, results = read_records(study)
    page = Page(study, figures=study_figures(study), provenance=provenance(study, runs, results))
    page.cost = cpu_hours(runs)
    page.updated = max(str(p["date"]) for p in page.provenance if p.get("date"))
    ref = res["settings"].get("reference", "grpo-n4")
    rows = []
    for group in ("arms", "probe"):
        for arm, a in (res.get(group) or {}).items():
            per = a["summary"]["per_seed"]
            med = _median([s["samples_to_target_vs_ref"] for s in per])
            steps = _median([s["steps_to_target_vs_ref"] for s in per])
            rows.append((arm, a.get("spec", ""), steps, med, _median([s["final_pass_rate"] for s in per]), len(per)))
    best = min((r for r in rows if r[0] != ref), key=lambda r: r[3])
    page.verdict = (
        f"Exploratory (no registration). Per sample the cheapest arm to the target pass rate "
        f"{res['target_pass_rate']:.3f} is `{best[0]}` at {best[3]:.2f}x `{ref}`'s samples (median over seeds); "
        "below 1 would be cheaper than GRPO-n4."
    )
    page.body += [
        "## Result",
        "",
        f"Simulated hard pool ({res['pool']['size']} prompts, mean pass rate {res['pool']['mean_pass_rate']:.3f}), "
        f"{res['settings']['steps']} steps, {res['settings']['seeds']} seeds, {res['settings']['batch_size']} prompts "
        f"a step; ratios to `{ref}`, medians over seeds (below 1: fewer steps or samples than `{ref}`).",
        "",
        "| arm | spec | steps to target vs ref | samples to target vs ref | final pass rate | seeds |",
        "|---|---|---|---|---|---|",
        *[f"| `{a}` | `{s}` | {f2(st)} | {f2(m)} | {f2(fp)} | {n} |" for a, s, st, m, fp, n in rows],
    ]
    page.checks += [
        ("pre-registered", "no: exploratory, on a simulated policy"),
        ("deterministic (the simulation re-ran to the same numbers)", "see `studies/allocators_sim/README.md`"),
        ("committed results regenerate from the records", "`studies/allocators_sim/tests/test_regenerate.py`"),
    ]
    return page


def _median(xs: list[float]) -> float | None:
    xs = sorted(x for x in xs if x is not None)
    if not xs:
        return None
    mid = len(xs) // 2
    return xs[mid] if len(xs) % 2 else (xs[mid - 1] + xs[mid]) / 2


def belief_quality_page() -> Page:
    study = "belief_quality"
    res = read_json(STUDIES / study / "results" / "belief_quality.json")
    runs, results = read_records(study)
    page = Page(study, figures=study_figures(study), provenance=provenance(study, runs, results))
    page.cost = cpu_hours(runs)
    page.updated = str(res.get("date", ""))
    pools = res["pools"]
    beliefs = list(dict.fromkeys(b for p in pools.values() for b in p.get("beliefs", {})))

    def mean(p: str, b: str) -> float | None:
        xs = pools[p].get("beliefs", {}).get(b, {}).get("signal")
        return sum(xs) / len(xs) if xs else None

    def share(p: str, b: str) -> float | None:
        u, o, x = mean(p, "uniform"), mean(p, "oracle"), mean(p, b)
        return None if None in (u, o, x) or o == u else (x - u) / (o - u)

    page.body += [
        "## Result",
        "",
        "Mean exact P(signal at n=4) of the admitted prompts after the burn-in, and the belief's share of the "
        "oracle's gain over uniform admission, (belief - uniform) / (oracle - uniform); policy held fixed, seed means.",
        "",
        "| belief | " + " | ".join(f"{p} P / share" for p in pools) + " |",
        "|---|" + "---|" * len(pools),
    ]
    for b in beliefs:
        page.body.append(f"| `{b}` | " + " | ".join(f"{f2(mean(p, b))} / {f2(share(p, b))}" for p in pools) + " |")
    deployable = [b for b in beliefs if b not in ("uniform", "oracle") and "oracle" not in b]
    best = {p: max(deployable, key=lambda b: share(p, b) or -9) for p in pools}
    page.verdict = (
        "Diagnostic (not pre-registered). The best deployable belief recovers "
        + ", ".join(f"{f2(share(p, best[p]))} of the oracle's gain on `{p}` (`{best[p]}`)" for p in pools)
        + "."
    )
    page.checks += [
        ("pre-registered", "no: a diagnostic chosen after the signal-draw result"),
        ("seeds", str(len(next(iter(pools.values()))["beliefs"]["uniform"]["signal"]))),
        ("committed results regenerate from the records", "`studies/belief_quality/tests/test_regenerate.py`"),
    ]
    return page


def fewer_samples_page() -> Page:
    """The first registration's claims and result, then each later registration (`registrations/*.toml` with a
    `name`: its result in `results/<name>/`), registered or with its result."""
    study = "fewer_samples"
    regs = STUDIES / study / "registrations"
    page = Page(study, figures=study_figures(study))
    reg, result, body = _fewer_samples_registration(regs / "preregistration.toml", "## Registration")
    page.body = body
    inst = reg.get("instrument", {})
    main = _main_runs(inst)
    later = [(f, tomllib.loads(f.read_text())) for f in sorted(regs.glob("*.toml")) if f.name != "preregistration.toml"]
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
        _, later_result, body = _fewer_samples_registration(path, f"## Later registration: `{name}`")
        page.body += ["", *body, ""]
        runs, results = read_records(study, name)
        planned = _main_runs(later_reg.get("instrument", {}))
        if not later_result.exists():
            phases = [r.get("phase") for r in runs.values()]
            page.body += [
                f"Registered; {phases.count('sweep')} lr-sweep runs and {phases.count('main')} of {planned} main runs "
                "recorded: no result yet.",
            ]
            page.verdict += f" `{name}`: registered, no result yet."
            continue
        later_res = read_json(later_result)
        page.body += result_section(later_res, planned, level="###")
        page.provenance += provenance(study, runs, results)
        h, n, timed = cpu_hours(runs)
        page.cost = (page.cost[0] + h, page.cost[1] + n, page.cost[2] + timed) if page.cost else (h, n, timed)
        got = {fig: c for fig, c in later_res.get("claims", {}).items() if c.get("verdict")}
        state = f"interim ({main_runs(later_res)} of {planned} main runs)" if later_res.get("partial") else "final"
        page.verdict += f" `{name}`, {state}: {_verdicts(got) or 'no verdict yet.'}"
    return page


def _fewer_samples_registration(path: Path, heading: str) -> tuple[dict[str, Any], Path, list[str]]:
    """A registration of the fewer-samples study: its content, where its result goes and its section (file, date,
    code, pools, seeds, budget, claims with goals, arms)."""
    text = path.read_text()
    reg = tomllib.loads(text)
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
        *[f"| {c['figure']} | `{c['arm']}` | {cell(c.get('goal', ''))} |" for c in reg.get("claim", [])],
        "",
        "| arm | spec |",
        "|---|---|",
        *[f"| `{a.split('=', 1)[0]}` | {code(a.split('=', 1)[1])} |" for a in inst.get("arms", [])],
    ]
    return reg, result, body


def _main_runs(inst: dict[str, Any]) -> int:
    """A registration's main runs: every arm on every pool with every seed."""
    return len(inst.get("arms", [])) * len(inst.get("pools", [])) * len(inst.get("seeds", []))


def _span(seeds: list[int]) -> str:
    return f"{min(seeds)}-{max(seeds)}" if seeds else "none"


def _verdicts(claims: dict[str, Any]) -> str:
    return " ".join(
        f"{fig}{' (' + c['arm'] + ')' if c.get('arm') else ''}: {c['verdict']}{claim_span(c)}."
        for fig, c in claims.items()
    )


def claim_span(claim: dict[str, Any]) -> str:
    """ " (0.78-1.38 over 4 pools)": the range of a claim's per-pool factors, empty when no pool has one."""
    vals = [p["value"] for p in (claim.get("by_pool") or {}).values() if isinstance(p.get("value"), int | float)]
    if not vals:
        return ""
    return f" ({f2(min(vals))}-{f2(max(vals))} over {len(vals)} pools)" if len(vals) > 1 else f" ({f2(vals[0])})"
