"""The convergence goals P1-P4 of this repository's first studies, read from a `compare` result, and the agreement
of two such results (`--check-against`).

1) `goals(records, summary, ...)` per pool: P1 = k_steps(Seq-balanced vs GRPO-n4); P2 = k_tokens(the arm named in
   advance vs budget-matched GRPO); P2b = k_tokens(that arm vs GRPO-n4); P3 = no-signal share Seq-balanced / GRPO-n4
   (ratio of seed means); P4 = step time ratio (this run's; benchmarks/step_time.py owns P4 itself). The reference's
   shares and times cover its first `steps` only, the same stretch of training as the other arms'.
2) `goals_for_summary(results, pool)`: summary.json's P-entries, the first pool's figures with every other pool's
   beside them and the testbed named.
3) `agreement(first, second)`: per pool and goal (and compute headline), both runs' figures with their intervals and
   whether each lies in the other's interval.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from reinforce_ada.bench.analysis import head_stat
from reinforce_ada.bench.curves import ratio_of_means
from reinforce_ada.bench.report import _ci


def by_arm(records: Sequence[dict[str, Any]]) -> dict[str, dict[int, dict[str, Any]]]:
    out: dict[str, dict[int, dict[str, Any]]] = defaultdict(dict)
    for r in records:
        out[r["arm"]][r["seed"]] = r
    return out


def _paired(arms: dict[str, dict[int, dict]], a: str, b: str, key: str, steps: int, stat: str) -> dict[str, Any]:
    """`ratio_of_means` of a per-step statistic (`analysis.head_stat`) of arm `a` over arm `b`, paired by seed."""
    seeds = sorted(set(arms.get(a, {})) & set(arms.get(b, {})))
    if not seeds:
        return {"value": None, "lo": None, "hi": None}
    num = [head_stat(arms[a][s], key, steps, stat) for s in seeds]
    den = [head_stat(arms[b][s], key, steps, stat) for s in seeds]
    return ratio_of_means(num, den)


def goals(
    records: Sequence[dict[str, Any]], summary: dict[str, Any], reference: str, matched: str, p2_arm: str, steps: int
) -> dict[str, Any]:
    """P1, P2, P2b, P3 and P4's convergence-run entry for one pool, each with its 90% interval."""
    t = summary["table"]
    arms = by_arm(records)

    def pick(arm: str, key: str) -> dict[str, Any]:
        row = t.get(arm, {}).get(key)
        return {k: row.get(k) for k in ("value", "lo", "hi", "median", "per_seed")} if row else {"value": None}

    seq = "seq-bal"
    return {
        "P1": {
            **pick(seq, "k_steps"),
            "goal": ">= 2.0",
            "what": "time-scale factor on RL steps, Ada-Seq-balanced vs GRPO-n4 (Ada(t) = GRPO(k t)), "
            "geometric mean over paired seeds, 90% bootstrap interval",
        },
        "P2": {
            **pick(p2_arm, "k_tokens_vs_matched"),
            "goal": ">= 1.5",
            "what": f"time-scale factor on generated tokens, {p2_arm} (named in advance) vs budget-matched GRPO",
        },
        "P2b": {
            **pick(p2_arm, "k_tokens"),
            "goal": "none (context for P2)",
            "what": f"time-scale factor on generated tokens, {p2_arm} vs GRPO-n4",
        },
        "P3": {
            **_paired(arms, seq, reference, "no_signal_share", steps, "mean"),
            "goal": "<= 0.20",
            "what": "share of a step's prompts without gradient, Ada-Seq-balanced / GRPO-n4 (ratio of seed means)",
            "seq_bal": t.get(seq, {}).get("no_signal_share", {}).get("median"),
            "grpo_n4": t.get(reference, {}).get("no_signal_share", {}).get("median"),
        },
        "P4": {
            **_paired(arms, seq, reference, "time_step_s", steps, "median"),
            "goal": "<= 1.3",
            "what": "wall-clock per step, Ada-Seq-balanced / GRPO-n4, from the convergence runs (not interleaved)",
        },
    }


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


def agreement(first: dict[str, Any], second: dict[str, Any]) -> dict[str, Any]:
    """Per pool and goal: both runs' figures with intervals, and whether each lies in the other's interval."""
    out: dict[str, Any] = {}
    for pool, s2 in second["by_pool"].items():
        s1 = first.get("by_pool", {}).get(pool)
        if s1 is None:
            continue
        rows = {}
        figures = dict(s2["goals"])
        firsts = dict(s1["goals"])
        # the compute headlines (C0-C3), read with their t-intervals where they have one
        t = lambda h: {**h, "lo": h.get("t_lo", h.get("lo")), "hi": h.get("t_hi", h.get("hi"))}  # noqa: E731
        figures.update({k: t(h) for k, h in second.get("compute", {}).get("by_pool", {}).get(pool, {}).items()})
        firsts.update({k: t(h) for k, h in first.get("compute", {}).get("by_pool", {}).get(pool, {}).items()})
        for key, g2 in figures.items():
            g1 = firsts.get(key, {})
            if g1.get("value") is None or g2.get("value") is None:
                continue
            inside = lambda v, g: g.get("lo") is not None and g["lo"] <= v <= g["hi"]  # noqa: E731
            rows[key] = {
                "first": {k: g1.get(k) for k in ("value", "lo", "hi")},
                "second": {k: g2.get(k) for k in ("value", "lo", "hi")},
                "second_in_first": inside(g2["value"], g1),
                "first_in_second": inside(g1["value"], g2),
                "overlap": None
                if g1.get("lo") is None or g2.get("lo") is None
                else bool(g1["lo"] <= g2["hi"] and g2["lo"] <= g1["hi"]),
            }
        out[pool] = rows
    return out


def format_agreement(agree: dict[str, Any]) -> str:
    lines = ["agreement with the first run (value [90% interval]):"]
    for pool, rows in agree.items():
        for key, r in rows.items():
            lines.append(
                f"  {pool:<8}{key:<5} first {_ci(r['first'], '.3f'):<24} second {_ci(r['second'], '.3f'):<24} "
                f"{'intervals overlap' if r['overlap'] else 'intervals DISJOINT'}"
                f"{'' if r['second_in_first'] and r['first_in_second'] else ' (a value outside the other interval)'}"
            )
    return "\n".join(lines)
