"""The belief-quality study's results page (`docgen` finds it): each belief's share of the oracle's gain over uniform
admission, per pool."""

from __future__ import annotations

from docgen.cells import f2
from docgen.page import Page, provenance, study_figures
from docgen.schema import NUMBER, check
from docgen.sources import STUDIES, cpu_hours, read_json, read_records

TITLE = "What a belief knows before a prompt's first sample"
RESULT = {"date?": str, "pools": {"*": {"beliefs": {"uniform": {"signal": [NUMBER]}, "*": {"signal?": [NUMBER]}}}}}
"""What the page publishes of `belief_quality.json` (`docgen.schema`): every pool's beliefs, uniform's included."""


def page() -> Page:
    study = "belief_quality"
    res = read_json(STUDIES / study / "results" / "belief_quality.json")
    check(res, RESULT)
    runs, results = read_records(study)
    page = Page(study, TITLE, 4, figures=study_figures(study), provenance=provenance(study, runs, results))
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
