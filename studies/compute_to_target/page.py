"""The compute-to-target study's page for the documentation (`docgen` finds it): its results page (the registered
figures C0-C3 and every arm's tokens factor per pool), the results overview's answer to "does adaptive sampling pay?"
with its figure (`page_figure`), the rows of the strategy pages, and the blocks of hand-written pages: the README's
results table (`results`), the answer to "which sampler?" with the one wording of the per-step gain, the
samples-per-step table and the pools of the glossary."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from docgen.blocks import relink
from docgen.cells import code, f2, with_interval
from docgen.page import Page
from docgen.schema import ESTIMATE, check
from docgen.sources import STUDIES, read_json
from docgen.summary import read_summary, summary_page
from studies.compute_to_target.page_figure import draw_tokens, tokens_data

RESULTS = STUDIES / "compute_to_target" / "results"
POOLS = ("hard", "small", "default", "mixed")
"""The pools, in the order the study registered them."""
FIGURE = "docs/results/img/compute_to_target_tokens"
AXES = {"tokens": {"best_uniform": str}, "steps": {"best_uniform": str}, "*": dict}
TABLE = {"table": {"*": {"tokens?": ESTIMATE, "steps?": ESTIMATE}}, "axes": AXES}
"""What the pages publish of a pool's compute table (`by_pool.<pool>.compute`; `docgen.schema`)."""


def page() -> Page:
    out = summary_page("compute_to_target", "Compute to target: does an allocator save tokens?", 1, ("C1", "C0"))
    out.body += ["", *arms_table()]
    out.overview = [
        "## Does adaptive sampling pay?",
        "",
        *relink(pays_table(link="#studies"), "../"),
        "",
        f"![compute to target](img/{Path(FIGURE).name}.png)",
        "",
        "`python -m docgen` draws this figure from `studies/compute_to_target/results/compute_to_target_<pool>.json` "
        "(the study's own figures regenerate with `python -m studies.compute_to_target.regenerate`).",
    ]
    out.blocks = {
        "results": pays_table(link="results/index.md"),
        "which-sampler": which_sampler(),
        "samples-per-step": samples_per_step(),
        "pools": pools_table(),
    }
    out.by_strategy = by_strategy()
    out.drawings = {FIGURE: (lambda: tokens_data({p: t for p in POOLS if (t := pool_table(p))}), draw_tokens)}
    return out


def pool_table(pool: str) -> dict[str, dict[str, Any]] | None:
    path = RESULTS / f"compute_to_target_{pool}.json"
    if not path.exists():
        return None
    res = read_json(path)
    check(res, {"by_pool": {pool: {"compute": TABLE}}, "arms?": {"*": str}})
    return res["by_pool"][pool]["compute"]


def arms_table() -> list[str]:
    """Every arm's tokens factor against the best uniform arm, per pool (the compute-to-target figure's numbers)."""
    tables = {p: pool_table(p) for p in POOLS}
    tables = {p: t for p, t in tables.items() if t}
    if not tables:
        return []
    arms = list(dict.fromkeys(a for t in tables.values() for a in t["table"]))
    lines = [
        "### Every arm on tokens",
        "",
        "Tokens to target, the best uniform GRPO on that pool / the arm (above 1: fewer tokens than the best uniform "
        "arm), 90% t-interval over 9 paired seeds; the reference is "
        + ", ".join(f"`{t['axes']['tokens']['best_uniform']}` on `{p}`" for p, t in tables.items())
        + ".",
        "",
        "| arm | " + " | ".join(tables) + " |",
        "|---|" + "---|" * len(tables),
    ]
    for arm in arms:
        row = [with_interval(t["table"].get(arm, {}).get("tokens", {})) for t in tables.values()]
        lines.append(f"| `{arm}` | " + " | ".join(row) + " |")
    return lines


def pays_rows() -> list[dict[str, Any]]:
    """Per pool: the best uniform arm, MoPPS (the best deployable adaptive arm), Ada-Seq-balanced and the oracle
    ceiling (C0), each as tokens to target against the best uniform arm."""
    summary = read_summary("compute_to_target")
    rows = []
    for pool in POOLS:
        t = pool_table(pool)
        if not t:
            continue
        c0 = summary["C0"]["pools"][pool]  # the oracle's ceiling on every pool with a table: missing is an error
        rows.append(
            {
                "pool": pool,
                "reference": t["axes"]["tokens"]["best_uniform"],
                "mopps": t["table"].get("mopps", {}).get("tokens", {}),
                "seq": t["table"].get("seq-bal", {}).get("tokens", {}),
                "oracle": c0,
            }
        )
    return rows


def pays_table(link: str = "results/index.md") -> list[str]:
    """The small "does adaptive sampling pay?" table (README and the results overview)."""
    rows = pays_rows()
    lines = [
        "| pool | best uniform GRPO | best adaptive arm (MoPPS) | Ada-Seq-balanced (`seq`) | oracle ceiling |",
        "|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| `{r['pool']}` | `{r['reference']}` = 1 | {with_interval(r['mopps'])} | {with_interval(r['seq'])} | "
            f"{with_interval(r['oracle'])} |"
        )
    lo = min(r["mopps"]["value"] for r in rows)
    hi = max(r["mopps"]["value"] for r in rows)
    seq_hi = max(r["seq"]["value"] for r in rows)
    llm = read_summary("llm_convergence")["L1"]
    return lines + [
        "",
        f"Tokens to reach the same held-out accuracy, relative to the best uniform GRPO (above 1 = fewer tokens; 90% "
        f"interval, 9 paired seeds, pre-registered; [the terms](glossary.md)). **Verdict: per generated token, no "
        f"adaptive allocator beat plain GRPO** (best {f2(lo)}-{f2(hi)}; Ada-Seq-balanced at most {f2(seq_hi)}); "
        f"{per_step()}. On a real model (SmolLM2-135M-Instruct, {len(llm.get('per_seed', []))} seeds) "
        f"{llm.get('arm', '')} reads {with_interval(llm)} on tokens against GRPO-n4. [Every study]({link}).",
    ]


def per_step() -> str:
    """The one wording of Ada-Seq-balanced's per-step gain, naming the arm each factor compares it with: GRPO-n4
    (the convergence study's registered P1) and the best uniform arm per step on every pool of this study."""
    p1 = read_summary("convergence")["P1"]
    tables = [t for t in map(pool_table, POOLS) if t]
    steps = [t["table"]["seq-bal"]["steps"]["value"] for t in tables]
    best = sorted({t["axes"]["steps"]["best_uniform"] for t in tables})
    return (
        f"per RL step Ada-Seq-balanced learns {f2(p1['value'])}x as fast as GRPO-n4 (P1, 90% interval "
        f"{f2(p1['lo'])}-{f2(p1['hi'])}) and {f2(min(steps))}-{f2(max(steps))}x as fast as the best uniform arm per "
        f"step ({', '.join(f'`{b}`' for b in best)} on every pool), because it draws more samples a step"
    )


def which_sampler() -> list[str]:
    """The answer to "which sampler?" in one sentence (the README, docs/index.md, docs/which-sampler.md)."""
    rows = pays_rows()
    lo, hi = min(r["mopps"]["value"] for r in rows), max(r["mopps"]["value"] for r in rows)
    beaten = [r["pool"] for r in rows if (r["mopps"].get("t_lo") or 0) > 1]
    verdict = (
        f"no adaptive sampler beat the best uniform GRPO per token on the {len(rows)} registered pools"
        " of the tiny testbed's short answers (2-6 tokens, every sample about as long)"
        if not beaten
        else f"an adaptive sampler beat the best uniform GRPO per token only on {', '.join(beaten)} (short answers)"
    )
    return [
        f"**Which sampler?** When generated tokens are the bill, use `--strategy auto` (plain GRPO): {verdict} (the "
        f"best, MoPPS, at {f2(lo)}-{f2(hi)} of its tokens; [measured](results/compute_to_target.md)). When learner "
        f"steps are the bill, the default, `--strategy seq` (Ada-Seq-balanced, the paper's best setting), pays: "
        f"{per_step()}."
    ]


def by_strategy() -> dict[str, list[str]]:
    """Each strategy's arms in this study (the head of the arm's spec, and a strategy it names as `select=`) with their
    tokens factor per pool: the rows of the strategy pages."""
    tables = {p: t for p in POOLS if (t := pool_table(p))}
    specs: dict[str, str] = {}
    for pool in tables:
        specs |= read_json(RESULTS / f"compute_to_target_{pool}.json")["arms"]
    arms_of: dict[str, list[str]] = {}
    for arm, spec in specs.items():
        head = spec.split("|")[0]
        for name in dict.fromkeys([head.split(":")[0].strip(), *re.findall(r"select=(\w+)", head)]):
            arms_of.setdefault(name, []).append(arm)
    refs = ", ".join(f"`{t['axes']['tokens']['best_uniform']}` on `{p}`" for p, t in tables.items())
    head = [
        "### Compute to target",
        "",
        f"Tokens to the same held-out accuracy against the best uniform GRPO of each pool ({refs}), 90% t-interval "
        "over 9 paired seeds, pre-registered; above 1 = fewer tokens ([the study](results/compute_to_target.md), "
        "[the terms](glossary.md)).",
        "",
        "| arm | spec | " + " | ".join(f"`{p}`" for p in tables) + " |",
        "|---|---|" + "---|" * len(tables),
    ]
    return {
        name: head
        + [
            f"| `{a}` | {code(specs[a])} | "
            + " | ".join(with_interval(t["table"].get(a, {}).get("tokens", {})) for t in tables.values())
            + " |"
            for a in arms
        ]
        for name, arms in arms_of.items()
    }


def pools_table() -> list[str]:
    """The registered pools as the runs built them (each result's `pools`): spec, size and pass-rate profile."""
    rows = [
        "| pool | spec (`reinforce-ada compare --pool`) | prompts | mean pass rate | below 0.02 |",
        "|---|---|---|---|---|",
    ]
    for pool in POOLS:
        path = RESULTS / f"compute_to_target_{pool}.json"
        if path.exists():
            e = read_json(path)["pools"][pool]
            rows.append(
                f"| `{pool}` | `{e['spec'].split('=', 1)[1]}` | {e['prompts']} | {f2(e['mean'])} | "
                f"{e['share_below_0.02']:.0%} |"
            )
    return rows


def samples_per_step() -> list[str]:
    """How far samples per step alone predict the tokens factors (`samples_per_step.json`), and Seq's case."""
    pools = read_json(RESULTS / "samples_per_step.json")["pools"]
    first = next(iter(pools.values()))
    lines = [
        f"| pool | best uniform arm | Spearman, all {first['arms_all']} non-oracle arms | Spearman, the "
        f"{first['arms_adaptive']} adaptive arms |",
        "|---|---|---|---|",
        *[
            f"| {pool} | {r['best_uniform'].replace('grpo', 'GRPO')} | {r['spearman_all']:.2f} | "
            f"{r['spearman_adaptive']:.2f} |"
            for pool, r in pools.items()
        ],
    ]
    tables = [t for t in map(pool_table, POOLS) if t]
    seq = [t["table"]["seq-bal"] for t in tables]
    drawn = [r["arms"]["seq-bal"]["samples_per_step"] for r in pools.values()]
    n4 = {r["arms"]["grpo-n4"]["samples_per_step"] for r in pools.values()}
    toks = [row["tokens"]["value"] for row in seq]
    return lines + [
        "",
        "`python -m studies.compute_to_target.samples_per_step` (from the committed results; it writes "
        "`studies/compute_to_target/results/samples_per_step.json`, with every arm's prediction and measurement).",
        "",
        f"Buying signal with samples pays almost the full token price: {per_step()}. It draws "
        f"{min(drawn):.0f}-{max(drawn):.0f} samples a step against GRPO-n4's {'/'.join(f'{x:.0f}' for x in n4)}, so "
        f"per token it reaches the same accuracy with {f2(min(toks))}-{f2(max(toks))} of the best uniform arm's "
        "efficiency (`compute_to_target_<pool>.json`, `by_pool.<pool>.compute.table.seq-bal`).",
    ]
