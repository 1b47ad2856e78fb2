"""The fewer-samples study's result section on its docs page (`page`, from `results/fewer_samples.json` or a later
registration's result): the registered claims per pool against their goals, every arm's tokens factor, accuracy at
equal tokens, the baselines' errors and how far the grid moves the old reference. A result still missing registered
runs is labelled interim throughout: its verdicts are read on the seeds recorded so far, not the registered ones."""

from __future__ import annotations

from typing import Any

from docgen.cells import cell, f2

AXIS = {"C1": "tokens", "C2": "cpu_s", "C2g": "gpu_s"}
"""The first registration's axes (a later result names each claim's `axis`)."""
CONTROLS = ("spo-32", "spo-64", "spo-128", "spo-64-uniform", "grpo-n4-prio", "n2-tracker")
"""The arms the equal-tokens table shows, where the result has them."""


def main_runs(res: dict[str, Any]) -> int:
    """How many main runs the result reads (its `runs` names them by phase)."""
    return len((res.get("runs") or {}).get("main", []))


def complete_pools(res: dict[str, Any]) -> set[str]:
    """The pools where every registered arm has every registered seed (`analysis.pool_figures`: final figures)."""
    return {pool for pool, f in res.get("by_pool", {}).items() if f.get("complete")}


def interim_note(res: dict[str, Any], registered_runs: int) -> str | None:
    """None for a complete result; else a sentence naming how many main runs it reads."""
    if not res.get("partial"):
        return None
    done = sorted(complete_pools(res))
    final = f"Complete (every arm, every registered seed): {', '.join(f'`{p}`' for p in done)}; their rows are final. "
    return (
        f"**Interim**: {main_runs(res)} of {registered_runs} registered main runs recorded; the figures below read "
        "the seeds recorded so far (paired by seed). "
        + (final if done else "")
        + "A claim is missed once a complete pool misses it, and met only when every pool is complete."
    )


def _num(x: float | None) -> str:
    """Two decimals, or two significant digits below 0.01 (an arm that spends its budget on a prior reads 0.002)."""
    return "n/a" if x is None else f"{x:.2f}" if abs(x) >= 0.01 or x == 0 else f"{x:.2g}"


def factor_cell(e: dict[str, Any]) -> str:
    """A factor with its 90% interval (`cells.with_interval`, small values legible)."""
    lo, hi = e.get("t_lo"), e.get("t_hi")  # the registered interval only (one seed has none)
    v = e.get("value")
    return "n/a" if v is None else f"{_num(v)} [{_num(lo)}, {_num(hi)}]" if lo is not None else _num(v)


def _factor_or_why(row: dict[str, Any], axis: str) -> str:
    """An arm's factor on `axis`, or why it has none; a factor no seed reaches a target with says so."""
    e = row.get(axis, {})
    if e.get("unpriced"):
        return "not priced (its prior pass was not timed)"
    targets = row.get(f"{axis}_per_target") or {}
    missed_all = targets and all(len(t.get("missed", [])) == len(row.get("seeds", [])) for t in targets.values())
    lr = f" at lr {row['lr']:g}" if isinstance(row.get("lr"), int | float) else ""  # the arm's swept lr on the pool
    return factor_cell(e) + lr + (" (reaches no target)" if missed_all and row.get("seeds") else "")


def diff_cell(a: dict[str, Any]) -> str:
    d, (lo, hi) = a.get("diff"), a.get("diff_interval") or (None, None)
    if d is None:
        return "n/a"
    return f"{d:+.3f}" + (f" [{lo:+.3f}, {hi:+.3f}]" if lo is not None else "")


def amendment_lines(res: dict[str, Any]) -> list[str]:
    """What each dated amendment stopped and what its arms' recorded runs show (`analysis.amendments`)."""
    lines = []
    for a in res.get("amendments", []):
        stopped = [f for f, c in res.get("claims", {}).items() if c.get("verdict") == "stopped"]
        seen = f"{a['recorded']} runs of the stopped arms were recorded before it and are kept in the records file"
        if a["with_base"]:
            seen += f"; {a['equal_to_base']} of the {a['with_base']} with their base arm's run equal it at every "
            seen += "evaluation, in accuracy and in tokens"
        claims = f" Claims stopped with them: {', '.join(stopped)}." if stopped else ""
        lines += [f"**Amendment of {a['date']}**: {len(a['stop'])} arms stopped. {seen}.{claims}", ""]
    return lines


def step_end_lines(res: dict[str, Any], moved: float = 0.02) -> list[str]:
    """The arms whose tokens factor moves by more than `moved` (relative) when every crossing is read at a step end
    (`analysis.step_ends`: a sensitivity reading, not registered), or one line saying none does."""
    out = []
    for pool, f in res.get("by_pool", {}).items():
        table, ends = f["compute"]["table"], f.get("step_ends") or {}
        for arm, e in ends.items():
            v, w = (table.get(arm, {}).get("tokens") or {}).get("value"), e.get("value")
            if v and w and abs(w / v - 1) > moved:
                out.append(f"`{arm}` on {pool}: {v:.3g} -> {w:.3g}")
    if not any(f.get("step_ends") for f in res.get("by_pool", {}).values()):
        return []
    lead = "Read with every crossing at a step end (a sensitivity reading, not registered: `analysis.step_ends`), "
    if not out:
        return [lead + f"no arm's tokens factor moves by more than {moved:.0%}.", ""]
    return [lead + f"these move by more than {moved:.0%}: " + "; ".join(out) + ".", ""]


def claims_rows(res: dict[str, Any]) -> list[str]:
    """C1/C2/C2g per pool with the reference, the interval, the seeds and the verdict against the goal."""
    interim = bool(res.get("partial"))
    done = complete_pools(res)
    rows = [
        "| figure | pool | reference (best uniform) | factor [90% t] | seeds | goal | verdict |",
        "|---|---|---|---|---|---|---|",
    ]
    for fig, c in res.get("claims", {}).items():
        if not (c.get("axis") or AXIS.get(fig)):  # a figure read off a compute-to-target axis
            continue
        for pool, e in (c.get("by_pool") or {}).items():
            v = e.get("verdict") or ("undefined" if c.get("verdict") else "reported (no goal)")  # `analysis.verdict`
            v = "**met**" if v == "met" else v
            seeds = str(len(e.get("seeds") or []))
            seeds += f" (+{e['undefined']} without a factor)" if e.get("undefined") else ""
            twin = f" (`{e['arm']}`)" if e.get("arm") else ""  # a twin claim names the twin it read
            rows.append(
                f"| {fig}{twin} | {pool} | `{e.get('reference')}` | {factor_cell(e)} | {seeds} | "
                f"{cell(c.get('goal') or 'none')} | {('interim: ' if interim and pool not in done else '') + v} |"
            )
    for pool, e in (res.get("claims", {}).get("S1", {}).get("by_pool") or {}).items():
        rho = e.get("rho")
        rows.append(
            f"| S1 | {pool} | Spearman's rho, samples per step vs tokens factor | "
            f"{'undefined' if rho is None else f'{rho:+.2f}'} | {len(e.get('arms') or [])} arms | none | reported |"
        )
    overall = [f"{fig}: {c.get('verdict')}" for fig, c in res.get("claims", {}).items() if c.get("verdict")]
    if overall:
        lead = "On the seeds recorded so far (interim), " if interim else "Registered verdicts: "
        rows += ["", lead + "; ".join(overall) + "."]
    return rows


def factors_rows(res: dict[str, Any], axis: str = "tokens") -> list[str]:
    """Every arm's factor on `axis` against the pool's best uniform arm (> 1: fewer tokens to the targets)."""
    pools = list(res.get("by_pool", {}))
    arms: list[str] = []
    for p in pools:
        arms += [a for a in res["by_pool"][p]["compute"]["table"] if a not in arms]
    refs = {p: res["by_pool"][p]["compute"]["axes"].get(axis, {}).get("best_uniform") for p in pools}
    head = "| arm | " + " | ".join(f"{p} (vs `{refs[p]}`)" for p in pools) + " |"
    rows = [head, "|---|" + "---|" * len(pools)]
    for a in arms:
        cells = [_factor_or_why(res["by_pool"][p]["compute"]["table"].get(a, {}), axis) for p in pools]
        rows.append(f"| `{a}` | " + " | ".join(cells) + " |")
    return rows


def equal_tokens_rows(res: dict[str, Any], arms: tuple[str, ...]) -> list[str]:
    """Held-out accuracy at the budget: the best uniform arm's and each of `arms`' paired difference to it."""
    rows = [
        "| pool | best uniform at the budget | its accuracy | "
        + " | ".join(f"`{a}` minus it [90%]" for a in arms)
        + " |",
        "|---|---|---|" + "---|" * len(arms),
    ]
    for pool, f in res.get("by_pool", {}).items():
        e = f["equal_tokens"]
        best = e["best_uniform"]
        rows.append(
            f"| {pool} | `{best}` | {f2(e['arms'].get(best, {}).get('level'))} | "
            + " | ".join(diff_cell(e["arms"].get(a, {})) for a in arms)
            + " |"
        )
    return rows


def value_rows(res: dict[str, Any], arm: str) -> list[str]:
    """V1: the tracker's mean |v_hat - p| (exact p from the testbed) of `arm` and of every other arm that has a tracker,
    beside GRPO-n4's group-mean error."""
    by_pool = res.get("by_pool", {})
    trackers = [arm] + sorted(
        {a for f in by_pool.values() for a, e in f.get("value_errors", {}).items() if "value_abs_error" in e} - {arm}
    )
    rows = [
        "| pool | " + " | ".join(f"`{a}` tracker" for a in trackers) + " | `grpo-n4` group mean |",
        "|---|" + "---|" * (len(trackers) + 1),
    ]
    for pool, f in by_pool.items():
        errs = f.get("value_errors", {})
        cells = [f2(errs.get(a, {}).get("value_abs_error")) for a in trackers]
        rows.append(
            f"| {pool} | " + " | ".join(cells) + f" | {f2(errs.get('grpo-n4', {}).get('group_mean_abs_error'))} |"
        )
    return rows


def old_reference_rows(res: dict[str, Any]) -> list[str]:
    """How far the grid moves the old (16 prompts per step) reference, on tokens."""
    rows = [
        "| pool | best of the 16-prompt family | best of the grid | grid's best vs the old best (tokens) |",
        "|---|---|---|---|",
    ]
    for pool, f in res.get("by_pool", {}).items():
        o = f.get("old_reference")
        if not o:
            continue
        g = o.get("grid_vs_old_on_tokens")
        rows.append(
            f"| {pool} | `{o['best_of_16_prompt_family']}` | `{o['best_of_grid']}` | "
            f"{factor_cell(g) if g else 'same arm (1.00)'} |"
        )
    return rows


def result_section(res: dict[str, Any], registered_runs: int, headline: str = "spo-64", level: str = "##") -> list[str]:
    """The page's result: the claims, then every arm's tokens factor, equal tokens, V1 and the old reference; its
    heading at `level` (a later registration's sits one below), the tables' one below that."""
    note = interim_note(res, registered_runs)
    sub = level + "#"
    arms = {a for f in res.get("by_pool", {}).values() for a in f["equal_tokens"]["arms"]}
    controls = tuple(a for a in CONTROLS if a in arms)
    return [
        f"{level} Result",
        "",
        *([note, ""] if note else []),
        f"{sub} The registered claims",
        "",
        *amendment_lines(res),
        *claims_rows(res),
        "",
        f"{sub} Every arm's tokens factor",
        "",
        "The compute-to-target factor of `bench.compute` against the pool's best uniform arm: k with arm(x) ~ "
        "reference(k x) on generated tokens over the accuracy range both curves reach (> 1: the arm needs 1/k of "
        "the tokens for the same accuracy), paired by seed, geometric mean with the 90% t-interval over per-seed log "
        "factors. An arm that climbs less high is read over its own range only; one that reaches none of the "
        "registered targets (fractions of the reference's gain) says so. Per-target factors and misses are in the "
        "result JSON (`by_pool.<pool>.compute.table.<arm>.tokens_per_target`). Each cell names the lr the arm's "
        f"sweep chose on the pool (its own seeds {_sweep_seeds(res)}).",
        "",
        *factors_rows(res),
        "",
        *step_end_lines(res),
        f"{sub} Accuracy at equal tokens (E1)",
        "",
        *equal_tokens_rows(res, controls or (headline,)),
        "",
        f"{sub} What the baseline buys (V1)",
        "",
        "Mean over each run's steps and the seeds of |v_hat - p|: the tracker's value of a prompt before the step "
        "against its exact pass rate under the policy that drew the samples (the testbed knows p), beside the same "
        "error of GRPO-n4's group mean (4 samples, the sample itself included). The two are averaged over different "
        "prompts and policies: each arm's own draws (SPO's prioritised, GRPO-n4's uniform) along its own training "
        "path; `spo-64-uniform` draws uniformly as GRPO-n4 does. As registered, not a same-prompt comparison.",
        "",
        *value_rows(res, headline),
        "",
        f"{sub} How far the grid moves the old reference",
        "",
        *old_reference_rows(res),
        "",
    ]


def _sweep_seeds(res: dict[str, Any]) -> str:
    """The lr sweep's seeds as `bench.compare` numbers them (from 1000 plus the first reported seed)."""
    c = res.get("config") or {}
    first = 1000 + int(c.get("seed_offset") or 0)
    return f"{first}-{first + int(c.get('sweep_seeds') or 2) - 1}"
