"""A `compare` result rebuilt from its runs: what `bench.compare.run_compare` computes after the runs, with the
study's own figures on top (the P-goals per pool, `protocol.goals`; C0-C3, `protocol.headlines`).

`rebuild(meta, runs)` takes what no run gives (`meta`: the compare settings, arms, testbed, pools, and the
registration as it was) and the runs per phase, and recomputes the lr choice, every pool's table, compute-to-target
table and goals, and the headline figures, with this checkout's analysis. `shape(result, skeleton)` keeps the keys a
committed result was written with (older results have no compute tables, say), in their order, so a result
regenerated from its records compares with the committed one key by key.
"""

from __future__ import annotations

from typing import Any

from reinforce_ada.bench import analysis, compute
from reinforce_ada.bench.arms import MATCHED, REFERENCE
from studies.protocol.goals import goals, goals_for_summary
from studies.protocol.headlines import compute_headlines


def lr_choice(meta: dict[str, Any], sweep: list[dict[str, Any]]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(lr_sweep, lrs_by_pool) as `run_compare` reports them: each swept pool's choice (`analysis.choose_lrs` over
    the sweep's runs, the grown grid's too), fixed lrs first, else the pool's choice, else the first pool's."""
    c = meta["config"]
    arms, pools = list(meta["arms"]), list(meta["pools"])  # in run order (`run_compare` writes them so)
    fixed = dict(c.get("fixed_lrs") or [])
    swept = [a for a in arms if a not in fixed]
    on = (pools if c.get("sweep_each_pool") else pools[:1]) if swept else []
    choice = {p: analysis.choose_lrs([r for r in sweep if r["pool"] == p], c["steps"]) for p in on}
    first = pools[0]
    lrs = {
        p: {a: fixed.get(a, choice.get(p, choice.get(first, {})).get(a, {}).get("best")) for a in arms} for p in pools
    }
    sweep_out = {"pool": first, "pools": sorted(choice), "seeds": c["sweep_seeds"], "arms": choice.get(first, {})}
    sweep_out.update(by_pool=choice, fixed=fixed)
    return sweep_out, lrs


def rebuild(meta: dict[str, Any], runs: dict[str, list[dict[str, Any]]], *, tables: bool = True) -> dict[str, Any]:
    """The result `meta` describes, recomputed from `runs` ({"sweep": [...], "main": [...]}). `tables`: the
    compute-to-target tables and C0-C3 (results written before them have none)."""
    c = meta["config"]
    spec_of = meta["arms"]
    sweep = [{**r, "spec": spec_of[r["arm"]]} for r in runs.get("sweep", [])]
    main = [{**r, "spec": spec_of[r["arm"]]} for r in runs["main"]]
    results = {k: v for k, v in meta.items() if k not in ("registration",)}
    results["lr_sweep"], lrs = lr_choice(meta, sweep)
    first = list(meta["pools"])[0]
    results["lrs"], results["lrs_by_pool"] = lrs[first], lrs
    results["runs"] = {"sweep": sweep, "main": main}
    results["by_pool"], results["missing"] = {}, {}
    for pool in meta["pools"]:
        recs = [r for r in main if r["pool"] == pool]
        if not any(r["arm"] == REFERENCE for r in recs):
            results["missing"][pool] = f"no {REFERENCE} run has finished on this pool yet"
            continue
        summ = analysis.summarize_pool(recs, REFERENCE, MATCHED if MATCHED in spec_of else None, c["steps"])
        if tables:
            sw = [r for r in sweep if r["pool"] == pool]
            summ["compute"] = compute.summarize(recs, sw, c["uniform"], c["oracles"])
        results["by_pool"][pool] = summ
    return study_figures(results, c, meta.get("registration"), tables=tables)


def study_figures(
    results: dict[str, Any], config: dict[str, Any], registration: dict[str, Any] | None, *, tables: bool = True
) -> dict[str, Any]:
    """A `compare` result (`bench.compare.run_compare`, or `rebuild`) with the studies' figures: each pool's goals
    P1-P4 (after its table, before its compute table, as the results were always written), C0-C3 checked against
    `registration` (its provenance and content, or None) in place of the package's headline, and summary.json's
    P-entries under `goals`."""
    main = results["runs"]["main"]
    for pool, summ in list(results["by_pool"].items()):
        recs = [r for r in main if r["pool"] == pool]
        g = goals(recs, summ, REFERENCE, MATCHED, config.get("p2_arm", "seq-bal"), config["steps"])
        comp = summ.pop("compute", None)
        summ["goals"] = g
        if comp is not None:
            summ["compute"] = comp
    if tables:
        results["compute"] = compute_headlines(config, results, registration)
    results["goals"] = goals_for_summary(results, next(iter(results["by_pool"])))
    return results


def skeleton(result: dict[str, Any]) -> dict[str, Any]:
    """The key order of a committed result: its top level, `lr_sweep` and each pool's summary."""
    pool = next(iter(result["by_pool"]))
    return {"top": list(result), "lr_sweep": list(result["lr_sweep"]), "by_pool": list(result["by_pool"][pool])}


def shape(result: dict[str, Any], sk: dict[str, Any]) -> dict[str, Any]:
    """`result` with only the keys of `sk` (`skeleton`), in its order; a key the rebuild lacks is an error."""
    missing = [k for k in sk["top"] if k not in result]
    if missing:
        raise KeyError(f"the rebuilt result lacks {missing}")
    out = {k: result[k] for k in sk["top"]}
    out["lr_sweep"] = {k: result["lr_sweep"][k] for k in sk["lr_sweep"]}
    out["by_pool"] = {p: {k: s[k] for k in sk["by_pool"]} for p, s in result["by_pool"].items()}
    return out
