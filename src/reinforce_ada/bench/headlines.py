"""A comparison's headline figures, from its results: issue 22's C0-C3 per pool (each checked against the
pre-registration) and summary.json's P-entries (the first pool's goals, every other pool's beside them)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from reinforce_ada.bench import compute, prereg

if TYPE_CHECKING:
    from reinforce_ada.bench.compare import CompareConfig


def compute_headlines(c: CompareConfig, results: dict[str, Any]) -> dict[str, Any]:
    """C0-C3 per pool for the pre-registered arm (or `compute_arm`), each checked against the pre-registration."""
    reg = prov = None
    if c.preregistration:
        reg, prov = prereg.load(c.preregistration), prereg.provenance(c.preregistration)
    out: dict[str, Any] = {"preregistration": None if reg is None else {**prov, "content": reg}}
    out["targets"] = list(compute.TARGETS)
    out["by_pool"], out["best_after_the_fact"] = {}, {}
    for pool, summ in results["by_pool"].items():
        comp = summ["compute"]
        figures: dict[str, Any] = {}
        for fig in prereg.FIGURES:
            named = [cl["arm"] for cl in prereg.claims_for(reg, fig)] if reg else []
            arm = "oracle" if fig == "C0" else (named[0] if named else c.compute_arm)
            head = compute.headline(comp, c.compute_arm if arm == "oracle" else arm)[fig]
            row = comp["table"].get(head.get("arm") or "", {})
            run = {"seeds": row.get("seeds", []), "steps": c.steps, "targets": list(compute.TARGETS)}
            head["preregistration"] = prereg.check(reg, prov, fig, arm, pool, run)
            figures[fig] = head
        out["by_pool"][pool] = figures
        out["best_after_the_fact"][pool] = compute.best_after_the_fact(comp, (*c.uniform, *c.oracles))
    return out


def goals_for_summary(results: dict[str, Any], pool: str) -> dict[str, Any]:
    """summary.json's P-entries: the first pool's figures, every other pool's beside them, the testbed named."""
    first = results["by_pool"][pool]["goals"]
    tb = results["testbed"]
    out = {}
    for key, g in first.items():
        entry = {**{k: v for k, v in g.items() if k != "per_seed"}, "pool": pool}
        entry["testbed_sha256"] = tb["sha256"]
        entry["testbed_is_shipped"] = tb["matches"]
        entry["testbed_exact_pass_rates"] = tb["exact_pass_rates"]
        for other, s in results["by_pool"].items():
            if other != pool:
                og = s["goals"][key]
                entry[f"pool_{other}"] = {k: og.get(k) for k in ("value", "lo", "hi")}
        out[key] = entry
    return out
