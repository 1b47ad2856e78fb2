"""The study's figures from its runs (pure: compact runs in, numbers out; `regenerate` writes them).

Per pool, against the best uniform arm of the registered grid (n x prompts per step at matched samples per step):
1) compute to target (`bench.compute.summarize`): each arm's tokens, CPU-seconds and GPU-model-seconds factors, paired
   by seed, with their 90% t-intervals -- C1, C2 and C2g for the registered arm;
2) equal tokens (`bench.equal_tokens.table`): each arm's held-out accuracy at the token budget minus the best uniform
   arm's, paired by seed -- E1;
3) what the baseline buys (V1): per arm, the mean over its steps and seeds of |v_hat - p| (the tracker's value before
   the step against the exact pass rate under the policy that drew the samples) and of |group mean - p|;
4) how far the extended reference moves the old one: the best uniform arm of the 16-prompt family (the old
   reference's shape) against the grid's best, on tokens;
5) a lever on the best uniform arm (a claim with `twin`, e.g. "-cap"): every uniform arm runs with the lever as the
   arm named with that suffix, and the figure is the best uniform arm's twin against the best uniform arm itself,
   per pool and axis -- the lever where a practitioner would add it, on the shape they would have tuned;
6) whether samples per step still rank the arms (S1): Spearman's rho between each arm's mean samples per step and
   its tokens factor against the best uniform arm, over every arm that is not an oracle (`estimator=oracle` reads
   what no deployable arm can; their names hold "oracle"), ties at their mean rank;
7) a sensitivity reading, not registered (`step_ends`): every arm's tokens factor with each crossing read at the
   first step end past the straight line between evaluations. On the first registration's runs it moves spo-64's C1
   by at most 1.3% (1.376 to 1.359 on `hard`, after the fact); Seq-balanced's steps on long answers are as long as
   the evaluation interval, where it can move by 5-10%.
Each registered claim is read against its goal where it has one (`verdict`); one whose arms a dated amendment
stopped is reported as stopped, with what the stopped arms' recorded runs show (`amendments`).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from reinforce_ada.bench import compute, equal_tokens
from studies.fewer_samples.study import claim_stopped, live_arms, pool_names

ERROR_SERIES = ("value_abs_error", "group_mean_abs_error")
OLD_FAMILY = ("grpo-n2x16", "grpo-n4", "grpo-n8")
"""The uniform arms of the compute-to-target study's shape (16 prompts per step)."""


def value_errors(main: list[dict[str, Any]]) -> dict[str, Any]:
    """Per arm: the mean over seeds of each run's mean value error and group-mean error (nan-aware)."""
    by: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for r in main:
        errors = r.get("errors") or {  # a compact run carries its means; a full record its per-step series
            k: float(np.nanmean(r[k])) if r.get(k) and np.isfinite(r[k]).any() else None for k in ERROR_SERIES
        }
        for k, v in errors.items():
            if v is not None and np.isfinite(v):
                by[r["arm"]][k].append(v)
    return {arm: {k: float(np.mean(v)) for k, v in errs.items()} for arm, errs in by.items()}


def pool_figures(
    main: list[dict[str, Any]],
    sweep: list[dict[str, Any]],
    reg: dict[str, Any],
    *,
    uniform: list[str] | None = None,
    budget: float | None = None,
) -> dict[str, Any]:
    """One pool's figures (module docstring); `uniform` and `budget` default to the registration's (a scratch run of
    a smaller grid or budget passes its own)."""
    inst = reg["instrument"]
    uniform = list(uniform or inst["uniform"])
    axes = (*compute.AXES, *inst.get("length_axes", ()))  # a long-answer registration adds bill_tokens, gpu_len_s
    summ = compute.summarize(main, sweep, uniform, (), fractions=inst.get("targets", compute.TARGETS), axes=axes)
    old = [u for u in OLD_FAMILY if u in {r["arm"] for r in main}]
    names = live_arms(reg)  # an arm an amendment stopped is not waited for
    seeds = {a: {int(r["seed"]) for r in main if r["arm"] == a} for a in names}
    out = {
        "complete": all(set(inst["seeds"]) <= seeds[a] for a in names),  # every arm, every seed: final figures
        "compute": summ,
        "equal_tokens": equal_tokens.table(main, uniform, budget or inst["token_budget"]),
        "value_errors": value_errors(main),
    }
    out["twins"] = twins(main, summ, reg)
    out["step_ends"] = step_ends(main, summ)
    out["samples_rank"] = samples_rank(main, summ)
    if old and "tokens" in summ["axes"]:
        arms = compute._by_arm(main)
        best_old, _ = compute.best_uniform(arms, old, "tokens")
        best = summ["axes"]["tokens"]["best_uniform"]
        out["old_reference"] = {
            "best_of_16_prompt_family": best_old,
            "best_of_grid": best,
            "grid_vs_old_on_tokens": compute.factor(arms[best], arms[best_old], "tokens") if best != best_old else None,
        }
    return out


def twins(main: list[dict[str, Any]], summ: dict[str, Any], reg: dict[str, Any]) -> dict[str, Any]:
    """Per twin suffix of the registered claims and per axis they read: the best uniform arm's twin against it
    (module docstring, 5), or nothing while either has no runs."""
    arms = compute._by_arm(main)
    out: dict[str, Any] = {}
    for claim in reg.get("claim", []):
        suffix, axis = claim.get("twin"), claim.get("axis")
        ref = summ["axes"].get(axis, {}).get("best_uniform") if suffix else None
        if ref is None or ref + suffix not in arms:
            continue
        row = compute.factor(arms[ref + suffix], arms[ref], axis)
        out.setdefault(suffix, {})[axis] = {**row, "arm": ref + suffix, "reference": ref}
    return out


def step_ends(main: list[dict[str, Any]], summ: dict[str, Any]) -> dict[str, Any]:
    """Every arm's tokens factor against the pool's best uniform arm with each crossing read at a step end
    (`curves.crossing` with the runs' `eval_step`), with its 90% t-interval: a sensitivity reading, not registered.
    The registered reading draws a straight line between evaluations, which credits an arm with about half a step per
    crossing: it matters where an arm's steps are long against the evaluation interval (module docstring, 7)."""
    best = summ["axes"].get("tokens", {}).get("best_uniform")
    if best is None:
        return {}
    arms = compute._by_arm(main)
    rows = {a: compute.factor(runs, arms[best], "tokens", step_ends=True) for a, runs in arms.items()}
    return {a: {k: r[k] for k in ("value", "t_lo", "t_hi")} for a, r in rows.items()}


def samples_rank(main: list[dict[str, Any]], summ: dict[str, Any]) -> dict[str, Any]:
    """Spearman's rho between mean samples per step and the tokens factor over the non-oracle arms with both
    (module docstring, 6); None with fewer than 3 such arms or a constant column."""
    per: dict[str, list[float]] = defaultdict(list)
    for r in main:
        v = (r.get("head") or {}).get("mean", {}).get("samples_per_step")
        if v is not None and "oracle" not in r["arm"]:
            per[r["arm"]].append(float(v))
    table = summ.get("table", {})
    pairs = {a: (float(np.mean(v)), table[a]["tokens"]["value"]) for a, v in per.items() if a in table}
    pairs = {a: xy for a, xy in pairs.items() if xy[1] is not None}
    x, y = (np.array([xy[i] for xy in pairs.values()]) for i in (0, 1))
    if len(pairs) < 3 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return {"rho": None, "arms": sorted(pairs)}
    rho = float(np.corrcoef(_ranks(x), _ranks(y))[0, 1])
    return {"rho": rho, "arms": sorted(pairs)}


def _ranks(v: np.ndarray) -> np.ndarray:
    """Ranks from 1, ties at their mean rank."""
    order = np.argsort(v, kind="stable")
    ranks = np.empty(len(v))
    ranks[order] = np.arange(1, len(v) + 1)
    for value in np.unique(v):
        tied = v == value
        ranks[tied] = ranks[tied].mean()
    return ranks


@dataclass(frozen=True)
class Goal:
    """A claim's numeric goal on a compute-to-target axis: the factor at least `at_least` on every pool of `pools`
    (all registered pools when None; `at_least_on` raises it on named pools), the interval's lower end above
    `lower_end_above` when set; `at_least` None: the figure is reported with no goal."""

    axis: str
    at_least: float | None = None
    lower_end_above: float | None = None
    at_least_on: dict[str, float] = field(default_factory=dict)
    pools: tuple[str, ...] | None = None


REGISTERED_GOALS = {
    "C1": Goal("tokens", 1.5, lower_end_above=1.0, at_least_on={"default": 2.0}),
    "C2": Goal("cpu_s", 1.3),
    "C2g": Goal("gpu_s", 1.5),
}
"""The first registration's goals, which its file states in prose (it predates goals written as keys)."""


def goal_of(claim: dict[str, Any]) -> Goal | None:
    """The claim's goal: from its keys (`axis`, `at_least`, `lower_end_above`, `at_least_on`, `pools`;
    `study.check_goal`) or, for a claim without them, the first registration's goal of its figure; None for a figure
    read off no compute-to-target axis (E1, V1)."""
    if "axis" not in claim:
        return REGISTERED_GOALS.get(claim["figure"])
    return Goal(
        claim["axis"],
        claim.get("at_least"),
        claim.get("lower_end_above"),
        dict(claim.get("at_least_on") or {}),
        tuple(claim["pools"]) if claim.get("pools") else None,
    )


def claims(by_pool: dict[str, Any], reg: dict[str, Any]) -> dict[str, Any]:
    """Each registered claim per pool: its figure (with interval) and, where a goal is numeric, a verdict."""
    out: dict[str, Any] = {}
    for claim in reg.get("claim", []):
        fig, goal = claim["figure"], goal_of(claim)
        arm = claim.get("arm") or f"the best uniform arm{claim['twin']}"
        gone = claim_stopped(reg, claim)
        if gone is not None:  # every arm it reads was stopped by a dated amendment: reported as such, never read
            axis = goal.axis if goal else None
            out[fig] = {"arm": arm, "goal": claim.get("goal"), "axis": axis, "by_pool": {}, "verdict": "stopped"}
            out[fig]["stopped"] = gone
            continue
        rows = {}
        for pool, f in by_pool.items():
            if goal is not None:
                if goal.pools is not None and pool not in goal.pools:
                    continue
                if claim.get("twin"):  # the best uniform arm's twin against it (module docstring, 5)
                    row = f.get("twins", {}).get(claim["twin"], {}).get(goal.axis, {})
                    ref = row.get("reference")
                else:
                    row = f["compute"]["table"].get(arm, {}).get(goal.axis, {})
                    ref = f["compute"]["axes"].get(goal.axis, {}).get("best_uniform")
                keys = ("value", "t_lo", "t_hi", "per_seed", "seeds", "unpriced", "arm")
                rows[pool] = {k: row.get(k) for k in keys if k != "arm" or claim.get("twin")} | {
                    "reference": ref,
                    "undefined": row.get("undefined") or 0,  # seeds whose curves share no gain: no factor
                }
                rows[pool]["verdict"] = verdict(goal, {pool: rows[pool]})
            elif fig == "E1":
                e = f["equal_tokens"]
                a = e["arms"].get(arm, {})
                rows[pool] = {"diff": a.get("diff"), "interval": a.get("diff_interval"), "reference": e["best_uniform"]}
            elif fig == "S1":
                rows[pool] = f.get("samples_rank", {})
            elif fig == "V1":
                rows[pool] = {
                    "tracker": f["value_errors"].get(arm, {}),
                    "grpo-n4": f["value_errors"].get("grpo-n4", {}),
                }
        out[fig] = {
            "arm": arm,
            "goal": claim.get("goal"),
            "axis": goal.axis if goal else None,
            "by_pool": rows,
            "verdict": overall(goal, rows, by_pool, reg),
        }
    return out


def overall(goal: Goal | None, rows: dict[str, Any], by_pool: dict[str, Any], reg: dict[str, Any]) -> str | None:
    """A claim's verdict over the pools it applies to: "missed" as soon as a complete pool misses it (every goal
    holds on every pool), "incomplete" while a pool has no runs or is still running, else `verdict`."""
    if goal is None or goal.at_least is None:
        return None
    v = verdict(goal, rows) or "incomplete"  # no pool of the claim's has runs yet
    final = {p: r for p, r in rows.items() if by_pool.get(p, {}).get("complete")}
    if final and verdict(goal, final) == "missed":
        return "missed"
    if any(p not in final for p in goal.pools or pool_names(reg)):
        return "incomplete"
    return v


def verdict(goal: Goal | None, rows: dict[str, Any]) -> str | None:
    """`goal` over the pools of `rows` (each row a factor with its interval): "met", "missed" or "incomplete" (a pool
    without a factor yet); None for a figure registered without a goal. A seed without a factor (its curve never
    shares a gain with the reference's) counts against the goal: never "met" with one."""
    if goal is None or goal.at_least is None or not rows:
        return None
    vals = {p: r.get("value") for p, r in rows.items()}
    if any(v is None for v in vals.values()):
        return "incomplete"
    ok = all(v >= goal.at_least_on.get(p, goal.at_least) for p, v in vals.items())
    ok = ok and not any(r.get("undefined") for r in rows.values())
    if goal.lower_end_above is not None:
        ok = ok and all((r.get("t_lo") or 0) > goal.lower_end_above for r in rows.values())
    return "met" if ok else "missed"


def amendments(reg: dict[str, Any], kept: list[dict[str, Any]], runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each dated amendment with what its stopped arms' recorded runs (`kept`) show: how many there are and, for an
    arm with a base (the amendment's `base` names it; a twin's, named with a registered claim's `twin` suffix, is its
    base arm), how many equal their base arm's run (same pool, phase, lr and seed, among `runs`) at every
    evaluation, in accuracy and in tokens."""
    suffixes = [str(c["twin"]) for c in reg.get("claim", []) if "twin" in c]
    base = {(r["pool"], r["phase"], r["arm"], r["lr"], r["seed"]): r for r in runs}
    out = []
    for a in reg.get("amendment", []):
        mine = [r for r in kept if r["arm"] in a["stop"]]
        pairs = []
        for r in mine:
            sfx = next((x for x in suffixes if r["arm"].endswith(x)), None)
            of = a.get("base", {}).get(r["arm"]) or (r["arm"].removesuffix(sfx) if sfx else None)
            b = base.get((r["pool"], r["phase"], of, r["lr"], r["seed"])) if of else None
            if b is not None:
                pairs.append(b["accuracy"] == r["accuracy"] and b["eval_tokens"] == r["eval_tokens"])
        row = {"date": str(a["date"]), "why": a["why"], "stop": list(a["stop"]), "recorded": len(mine)}
        out.append(row | {"with_base": len(pairs), "equal_to_base": sum(pairs)})
    return out


def figures(results: dict[str, Any], reg: dict[str, Any], pools: list[str]) -> dict[str, Any]:
    """Every pool's figures and the claims, under the run's own grid and budget (a --quick run's are smaller)."""
    main_runs, sweep = results["runs"]["main"], results["runs"]["sweep"]
    c = results.get("config") or {}
    kw = {"uniform": c.get("uniform"), "budget": c.get("token_budget")}
    read = {r["pool"] for r in main_runs if r["arm"] == compute.REFERENCE}  # a pool is read once GRPO-n4 has run there
    by_pool = {
        p: pool_figures([r for r in main_runs if r["pool"] == p], [r for r in sweep if r["pool"] == p], reg, **kw)
        for p in pools
        if p in read
    }
    out = {"by_pool": by_pool, "claims": claims(by_pool, reg)}
    if reg.get("amendment"):
        out["amendments"] = amendments(reg, results["runs"].get("stopped", []), [*sweep, *main_runs])
    return out
