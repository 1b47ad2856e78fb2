"""The simulated-policy study's results page (`docgen` finds it): every arm's steps and samples to the target pass
rate against GRPO-n4, medians over seeds."""

from __future__ import annotations

from docgen.cells import f2
from docgen.page import Page, provenance, study_figures
from docgen.schema import NUMBER, OPT_NUMBER, check
from docgen.sources import STUDIES, cpu_hours, read_json, read_records

TITLE = "Strategies and allocators on the simulated policy"
ARMS = {
    "*": {
        "spec?": str,
        "summary": {
            "per_seed": [
                {k: OPT_NUMBER for k in ("samples_to_target_vs_ref", "steps_to_target_vs_ref", "final_pass_rate")}
            ]
        },
    }
}
RESULT = {
    "target_pass_rate": NUMBER,
    "pool": {"size": NUMBER, "mean_pass_rate": NUMBER},
    "settings": {"steps": NUMBER, "seeds": NUMBER, "batch_size": NUMBER, "reference?": str},
    "arms": ARMS,
    "probe?": ARMS,
}
"""What the page publishes of `allocators_sim.json` (`docgen.schema`)."""


def page() -> Page:
    study = "allocators_sim"
    res = read_json(STUDIES / study / "results" / "allocators_sim.json")
    check(res, RESULT)
    runs, results = read_records(study)
    page = Page(study, TITLE, 3, figures=study_figures(study), provenance=provenance(study, runs, results))
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
