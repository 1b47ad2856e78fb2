"""Compute to target: what each arm pays for the accuracy it reaches, against the best uniform GRPO (pure numpy).

The question: *which allocator reaches a given accuracy with less compute than the best uniform GRPO, by
how much, and how far is that from the best any allocator could do?* Records are `bench.run` results of one pool.

1) Cost axes. A run's curve is read against four x's (`axis_x`): RL `steps`, generated `tokens`, `cpu_s` (the run's
   own recorded step times summed up to each evaluation: this machine, the load the interleaved runs shared) and
   `gpu_s` (the same steps priced by `bench.costmodel`'s GPU model, fitted to the paper's step times; a run that
   keeps its rows per round is priced by this checkout's model, one that keeps only its cumulative seconds is read
   as stored). Evaluation time is in none.
2) The best uniform arm, per pool and per axis: among the uniform arms run (GRPO-n with n in {2, 4, 8, 16}, each at
   its own swept lr), the one with the largest time-scale factor against GRPO-n4 on that axis. Picking the best of
   four after seeing the data flatters the reference, so every factor against it is conservative for the allocators.
3) Factors against it, paired by seed (`curves.scale_factor`: arm(x) ~ ref(k x) over the shared accuracy range):
   geometric mean over seeds with a 90% t-interval on the log factors (honest at 9 seeds) beside the percentile
   bootstrap and the per-seed values. Per target as well: `TARGETS` span the best uniform arm's whole reachable range
   (fractions of its median fitted gain), and each target's factor is x_ref / x_arm at that level, seed by seed; a
   seed where the arm never reaches the level counts as a miss (listed, left out of the mean).
4) The oracle: arms that see the exact pass rate every step (`bench.arms`, `estimator=oracle`). The `ceiling` is the
   largest oracle factor on tokens (a ceiling for signal-maximising allocators, not for every rule); each arm's
   `oracle_share` is (k_arm - 1) / (k_oracle - 1) on tokens, per seed resample (1.0 = the oracle's whole gain; the
   linear share is stricter than the log share for factors above 1).
5) Equal-lr sensitivity: from the lr sweep's runs (their own seeds), each arm at the best uniform arm's lr against the
   best uniform arm at that lr -- how much of a factor is the learning rate.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import numpy as np

from reinforce_ada.bench.costmodel import UnpricedPrior
from reinforce_ada.bench.curves import bootstrap, geo_mean, isotonic, paired_factor, scale_factor, to_target

AXES = ("steps", "tokens", "cpu_s", "gpu_s")
LENGTH_AXES = ("bill_tokens", "gpu_len_s")
"""Axes where answers are long (asked for by name; not in the default `AXES`, so older studies read as before):
`bill_tokens`, prompt + generated tokens (each sample pays its prompt, the prior pass's included), and `gpu_len_s`,
the steps priced from the samples' own lengths (`costmodel.gpu_length_seconds`)."""
TARGETS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)
"""Per-target levels: fractions of the best uniform arm's median fitted gain, its whole reachable range (fixed in
advance)."""
REFERENCE = "grpo-n4"


def axis_x(record: dict[str, Any], axis: str, *, steps_only: bool = False) -> list[float]:
    """The record's x at each evaluation on `axis` (one of AXES). On the seconds axes a run's prior pass (SPO's
    offline pass, `bench.run.prior_pass`) is charged before step 1, as its tokens are (`costmodel.prior_seconds`;
    `costmodel.UnpricedPrior` where it has no price); `steps_only` leaves it out (what a compact record stores)."""
    if axis == "steps":
        return [float(s) for s in record["eval_step"]]
    if axis == "tokens":
        return [float(t) for t in record["eval_tokens"]]
    if axis in ("cpu_s", "gpu_s"):
        from reinforce_ada.bench.costmodel import GPU_SERIES, cumulative, prior_seconds

        if axis == "gpu_s" and all(k in record for k in GPU_SERIES):  # priced by this checkout's model
            x = cumulative(record, "gpu")
        elif "time_step_s" not in record and isinstance(record.get(f"eval_{axis}"), list):
            x = [float(v) for v in record[f"eval_{axis}"]]  # a results JSON's run: its stored steps' seconds
        else:
            x = cumulative(record, axis[:3])
        prior = 0.0 if steps_only else prior_seconds(record, axis[:3])
        return [v + prior for v in x]
    if axis in LENGTH_AXES and f"eval_{axis}" in record and not _has_length_series(record, axis):
        stored = [float(v) for v in record[f"eval_{axis}"]]  # a compact run: its stored steps' values
        prior = 0.0 if steps_only else _length_prior(record, axis)
        return [v + prior for v in stored]
    if axis == "bill_tokens":  # the generated tokens (eval_tokens) plus every sample's prompt tokens
        from reinforce_ada.bench.costmodel import cumulative

        prompt = cumulative(record, lambda r: np.asarray(r["prompt_tokens_per_step"], dtype=float))
        prior = 0.0 if steps_only else _length_prior(record, axis)
        return [float(t) + p + prior for t, p in zip(record["eval_tokens"], prompt, strict=True)]
    if axis == "gpu_len_s":
        from reinforce_ada.bench.costmodel import cumulative, prior_seconds

        prior = 0.0 if steps_only else prior_seconds(record, "gpu_len")
        return [v + prior for v in cumulative(record, "gpu_len")]
    if axis == "process_s" and "process_s" in record:  # the real-model study's per-step process CPU time
        total = np.concatenate([[0.0], np.cumsum([v or 0.0 for v in record["process_s"]])])
        return [float(total[s]) for s in record["eval_step"]]
    raise ValueError(
        f"unknown cost axis {axis!r}; choose one of {[*AXES, *LENGTH_AXES, 'process_s']} (process_s: records with it)"
    )


def _has_length_series(record: dict[str, Any], axis: str) -> bool:
    from reinforce_ada.bench.costmodel import LENGTH_SERIES

    return "prompt_tokens_per_step" in record if axis == "bill_tokens" else all(k in record for k in LENGTH_SERIES)


def _length_prior(record: dict[str, Any], axis: str) -> float:
    """What a run's prior pass adds on a length axis, charged before step 1 (its prompt tokens; its priced seconds)."""
    if axis == "bill_tokens":
        return float((record.get("prior") or {}).get("prompt_tokens", 0))
    from reinforce_ada.bench.costmodel import prior_seconds

    return prior_seconds(record, "gpu_len")


def _curve(record: dict[str, Any], axis: str) -> tuple[np.ndarray, np.ndarray]:
    """(x, accuracy) with x made strictly increasing (a step that cost nothing on an axis moves x by 1e-9)."""
    x = np.asarray(axis_x(record, axis), dtype=float)
    x = np.maximum.accumulate(x) + 1e-9 * np.arange(len(x))
    return x, np.asarray(record["accuracy"], dtype=float)


def _by_arm(records: Sequence[dict[str, Any]]) -> dict[str, dict[int, dict[str, Any]]]:
    out: dict[str, dict[int, dict[str, Any]]] = defaultdict(dict)
    for r in records:
        out[r["arm"]][r["seed"]] = r
    return out


def factor(
    arm: dict[int, dict], ref: dict[int, dict], axis: str, min_gain: float = 1e-4, *, step_ends: bool = False
) -> dict[str, Any]:
    """Paired time-scale factor of `arm` against `ref` on `axis` over their shared seeds; a seed whose curves share
    less than `min_gain` of accuracy has no factor (`curves.scale_factor`). `step_ends`: every crossing read at a
    step end (`curves.crossing`, from the records' `eval_step`), the sensitivity reading for long steps."""
    seeds = sorted(set(arm) & set(ref))

    def k(s: int) -> float | None:
        steps = (ref[s]["eval_step"], arm[s]["eval_step"]) if step_ends else None
        return scale_factor(_curve(ref[s], axis), _curve(arm[s], axis), min_gain=min_gain, steps=steps)["k"]

    ks = [k(s) for s in seeds]
    out = paired_factor(ks)
    out["seeds"] = seeds
    return out


def best_uniform(arms: dict[str, dict[int, dict]], uniform: Sequence[str], axis: str) -> tuple[str, dict[str, Any]]:
    """(name, {arm: its factor vs GRPO-n4}) of the uniform arm with the largest factor against GRPO-n4 on `axis`."""
    present = [u for u in uniform if u in arms]
    if REFERENCE not in arms:
        raise ValueError(f"the uniform family needs {REFERENCE!r} (every uniform arm is first read against it)")
    scores = {u: factor(arms[u], arms[REFERENCE], axis) if u != REFERENCE else {"value": 1.0} for u in present}
    best = max(present, key=lambda u: scores[u]["value"] if scores[u]["value"] is not None else -np.inf)
    return best, {u: scores[u].get("value") for u in present}


def target_levels(ref: dict[int, dict], fractions: Sequence[float] = TARGETS) -> tuple[float, float, list[float]]:
    """(start, gain, levels): the reference's median start, median fitted gain, and the levels at `fractions`."""
    start = float(np.median([r["accuracy"][0] for r in ref.values()]))
    gain = float(np.median([isotonic(r["accuracy"])[-1] - r["accuracy"][0] for r in ref.values()]))
    return start, gain, [start + f * gain for f in fractions]


def per_target(
    arm: dict[int, dict], ref: dict[int, dict], axis: str, levels: Sequence[float], fractions: Sequence[float]
) -> dict[str, Any]:
    """Per target fraction: x_ref / x_arm seed by seed (misses listed), geometric mean and t-interval."""
    seeds = sorted(set(arm) & set(ref))
    xr = {s: to_target(*_curve(ref[s], axis), levels) for s in seeds}
    xa = {s: to_target(*_curve(arm[s], axis), levels) for s in seeds}
    out = {}
    for i, f in enumerate(fractions):
        ks: list[float | None] = []
        missed, ref_missed = [], []
        for s in seeds:
            r, a = xr[s][i], xa[s][i]
            if r is None:
                ref_missed.append(s)
                ks.append(None)
            elif a is None:
                missed.append(s)
                ks.append(None)
            else:
                ks.append(r / a if a > 0 else None)
        row = paired_factor(ks)
        row.update(level=levels[i], missed=missed, ref_missed=ref_missed)
        out[f"{f:g}"] = row
    return out


def oracle_share(arm: dict[int, dict], oracle: dict[int, dict], ref: dict[int, dict], axis: str) -> dict[str, Any]:
    """(k_arm - 1) / (k_oracle - 1) over shared seeds, geometric means per resample, with a bootstrap interval."""
    seeds = sorted(set(arm) & set(oracle) & set(ref))
    ka = [scale_factor(_curve(ref[s], axis), _curve(arm[s], axis))["k"] for s in seeds]
    ko = [scale_factor(_curve(ref[s], axis), _curve(oracle[s], axis))["k"] for s in seeds]
    ok = [i for i in range(len(seeds)) if ka[i] and ko[i]]
    a, o = np.array([ka[i] for i in ok]), np.array([ko[i] for i in ok])

    def stat(idx: np.ndarray) -> float | None:
        go = geo_mean(o[idx])
        return float((geo_mean(a[idx]) - 1) / (go - 1)) if go > 1 + 1e-9 else None

    value = stat(np.arange(len(ok))) if ok else None
    lo, hi = bootstrap(len(ok), stat) if ok and value is not None else (None, None)
    return {"value": value, "lo": lo, "hi": hi, "seeds": [seeds[i] for i in ok]}


def summarize(
    main: Sequence[dict[str, Any]],
    sweep: Sequence[dict[str, Any]],
    uniform: Sequence[str],
    oracles: Sequence[str],
    *,
    axes: Sequence[str] = AXES,
    fractions: Sequence[float] = TARGETS,
) -> dict[str, Any]:
    """One pool's compute-to-target table (module docstring): per axis the best uniform arm, per arm its factors."""
    arms = _by_arm(main)
    out: dict[str, Any] = {"axes": {}, "table": {}, "missing_axes": {}}
    usable = []
    for axis in axes:
        try:
            for r in main:
                axis_x(r, axis, steps_only=True)  # a prior without a price undefines its arm only (below)
            usable.append(axis)
        except (KeyError, ValueError) as e:  # records made before a series existed: that axis is left out, said why
            out["missing_axes"][axis] = f"run {r.get('key')}: {type(e).__name__} {e}"
    axes = tuple(usable)
    for axis in axes:
        name, scores = best_uniform(arms, uniform, axis)
        out["axes"][axis] = {"best_uniform": name, "uniform_vs_grpo_n4": scores}
    ref_name = out["axes"]["tokens"]["best_uniform"] if "tokens" in axes else out["axes"][axes[0]]["best_uniform"]
    start, gain, levels = target_levels(arms[ref_name], fractions)
    out.update(start_accuracy=start, reference_gain=gain, target_levels=levels, target_fractions=list(fractions))
    present_oracles = [o for o in oracles if o in arms]
    for arm, runs in arms.items():
        row: dict[str, Any] = {"seeds": sorted(runs), "lr": next(iter(runs.values()))["lr"]}
        for axis in axes:
            ref = arms[out["axes"][axis]["best_uniform"]]
            try:
                row[axis] = factor(runs, ref, axis)
                row[f"{axis}_per_target"] = per_target(runs, ref, axis, levels, fractions)
            except UnpricedPrior as e:  # this arm's cost on the axis is unknown: no factor, said why
                row[axis] = {"value": None, "seeds": [], "unpriced": str(e)}
                row[f"{axis}_per_target"] = {}
        out["table"][arm] = row
    if present_oracles and "tokens" in axes:
        best_o = max(present_oracles, key=lambda o: out["table"][o]["tokens"]["value"] or -np.inf)
        out["oracle"] = best_o
        ref = arms[out["axes"]["tokens"]["best_uniform"]]
        for arm, runs in arms.items():
            out["table"][arm]["oracle_share"] = oracle_share(runs, arms[best_o], ref, "tokens")
    out["equal_lr"] = equal_lr(sweep, out["axes"].get("tokens", {}).get("best_uniform"), main)
    return out


def equal_lr(sweep: Sequence[dict[str, Any]], ref_name: str | None, main: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Each arm at the best uniform arm's lr vs that arm at that lr, on tokens, over the sweep's seeds."""
    if not sweep or ref_name is None:
        return {}
    ref_lr = next((r["lr"] for r in main if r["arm"] == ref_name), None)
    at: dict[str, dict[int, dict]] = defaultdict(dict)
    for r in sweep:
        if ref_lr is not None and np.isclose(r["lr"], ref_lr):
            at[r["arm"]][r["seed"]] = r
    if ref_name not in at:
        return {"lr": ref_lr, "note": f"the sweep has no {ref_name} run at lr {ref_lr}"}
    rows: dict[str, Any] = {"lr": ref_lr, "reference": ref_name, "arms": {}}
    for arm, runs in at.items():
        f = factor(runs, at[ref_name], "tokens")
        rows["arms"][arm] = {k: f.get(k) for k in ("value", "t_lo", "t_hi", "per_seed", "seeds")}
    return rows


FIGURES = ("ceiling", "tokens", "cpu_s", "gpu_s", "oracle_share")
"""One pool's headline figures for an adaptive arm (`headline`)."""


def headline(pool_summary: dict[str, Any], arm: str) -> dict[str, Any]:
    """One pool's headline figures for `arm`, each against the best uniform arm of its axis: `ceiling` (the best
    oracle arm's tokens factor), `tokens`, `cpu_s`, `gpu_s` (the arm's factors) and `oracle_share` (its share of the
    oracle's gain on tokens)."""
    t = pool_summary["table"]

    def pick(row: dict[str, Any] | None, extra: dict[str, Any]) -> dict[str, Any]:
        if not row:
            return {"value": None, **extra}
        keys = ("value", "t_lo", "t_hi", "lo", "hi", "per_seed", "seeds", "undefined")
        return {**{k: row.get(k) for k in keys if k in row}, **extra}

    a, ax = t.get(arm, {}), pool_summary["axes"]
    oracle = pool_summary.get("oracle")
    return {
        "ceiling": pick(
            t.get(oracle, {}).get("tokens") if oracle else None,
            {"arm": oracle, "reference": ax["tokens"]["best_uniform"]},
        ),
        "tokens": pick(a.get("tokens"), {"arm": arm, "reference": ax["tokens"]["best_uniform"]}),
        "cpu_s": pick(a.get("cpu_s"), {"arm": arm, "reference": ax.get("cpu_s", {}).get("best_uniform")}),
        "gpu_s": pick(a.get("gpu_s"), {"arm": arm, "reference": ax.get("gpu_s", {}).get("best_uniform")}),
        "oracle_share": pick(a.get("oracle_share"), {"arm": arm, "oracle": oracle}),
    }


def best_after_the_fact(pool_summary: dict[str, Any], exclude: Sequence[str]) -> dict[str, Any]:
    """The arm with the largest tokens factor, oracles and uniform arms excluded: labelled as picked after the fact."""
    cands = {a: r["tokens"]["value"] for a, r in pool_summary["table"].items() if a not in exclude}
    cands = {a: v for a, v in cands.items() if v is not None}
    if not cands:
        return {"arm": None}
    best = max(cands, key=cands.__getitem__)
    return {"arm": best, "tokens": cands[best], "label": "picked after seeing the data (not pre-registered)"}


def no_ceiling_gain(ceiling: dict[str, Any] | None) -> bool:
    """The ceiling's interval holds 1: the oracle's own gain may be zero, so a share of it means nothing."""
    return (ceiling or {}).get("t_lo") is not None and ceiling["t_lo"] <= 1
