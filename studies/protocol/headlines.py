"""The compute-to-target study's headline figures C0-C3 per pool, each checked against the pre-registration, and
their summary.json entries.

The package's `bench.compute.headline` gives one pool's figures for an arm under plain names; here they get the
names the registrations use -- C0 = `ceiling` (the best oracle arm's tokens factor), C1 = `tokens`, C2 = `cpu_s`,
C2g = `gpu_s`, C3 = `oracle_share` -- and each is marked pre-registered or not (`protocol.prereg.check`).
"""

from __future__ import annotations

from typing import Any

from reinforce_ada.bench import compute
from studies.protocol import prereg

NAMES = {"C0": "ceiling", "C1": "tokens", "C2": "cpu_s", "C2g": "gpu_s", "C3": "oracle_share"}
"""Figure -> the key of `bench.compute.headline`."""
WHAT = {
    "C0": "tokens to target, best uniform GRPO / the best oracle arm (the ceiling for signal-maximising allocators)",
    "C1": "tokens to target, best uniform GRPO / the registered adaptive arm (time-scale factor, paired seeds)",
    "C2": "CPU wall-clock to target (recorded step times), best uniform GRPO on that axis / the registered arm",
    "C2g": "wall-clock to target under the GPU cost model (bench.costmodel), best uniform on that axis / the arm",
    "C3": "the registered arm's share of the oracle's gain on tokens, (k_arm - 1) / (k_oracle - 1)",
}


def figures(pool_summary: dict[str, Any], arm: str) -> dict[str, Any]:
    """C0-C3 of one pool (`bench.compute.headline` under the registrations' names)."""
    head = compute.headline(pool_summary, arm)
    return {fig: head[key] for fig, key in NAMES.items()}


def compute_headlines(config: dict[str, Any], results: dict[str, Any], registration: dict[str, Any] | None) -> dict:
    """C0-C3 per pool for the registered arm (or the config's `compute_arm`), each checked against the registration.
    `config`: the compare run's settings (steps, compute_arm, uniform, oracles); `registration`: the provenance of
    the registration file with its content under `content` (`prereg.provenance` + `prereg.load`), or None; under
    `first_quoted`, the registration as it stood when the result was first committed (`prereg.first_quoted`: each
    claim is checked against it; written without its content)."""
    given = registration or {}
    reg, quoted = given.get("content"), given.get("first_quoted")
    prov = {k: v for k, v in given.items() if k not in ("content", "first_quoted")} if registration else None
    written = registration
    if quoted is not None:
        written = {**registration, "first_quoted": {k: v for k, v in quoted.items() if k != "content"}}
    out: dict[str, Any] = {"preregistration": written}
    out["targets"] = list(compute.TARGETS)
    out["by_pool"], out["best_after_the_fact"] = {}, {}
    for pool, summ in results["by_pool"].items():
        comp = summ["compute"]
        figs: dict[str, Any] = {}
        for fig in prereg.FIGURES:
            named = [cl["arm"] for cl in prereg.claims_for(reg, fig)] if reg else []
            arm = "oracle" if fig == "C0" else (named[0] if named else config["compute_arm"])
            head = figures(comp, config["compute_arm"] if arm == "oracle" else arm)[fig]
            row = comp["table"].get(head.get("arm") or "", {})
            run = {"seeds": row.get("seeds", []), "steps": config["steps"], "targets": list(compute.TARGETS)}
            head["preregistration"] = prereg.check(reg, prov, fig, arm, pool, run, quoted)
            figs[fig] = head
        out["by_pool"][pool] = figs
        out["best_after_the_fact"][pool] = compute.best_after_the_fact(comp, (*config["uniform"], *config["oracles"]))
    return out


def summary_entries(results: dict[str, Any], reg: dict[str, Any] | None) -> dict[str, Any]:
    """summary.json's C-entries: per pool the figure with its t-interval, bootstrap interval, seeds and mark."""
    goals = {c["figure"]: c.get("goal") for c in (reg or {}).get("claim", [])}
    out: dict[str, Any] = {}
    for pool, figs in results["compute"]["by_pool"].items():
        for fig, h in figs.items():
            e = out.setdefault(fig, {"what": WHAT[fig], "goal": goals.get(fig), "pools": {}})
            e["pools"][pool] = {
                k: h.get(k) for k in ("value", "t_lo", "t_hi", "lo", "hi", "arm", "reference", "oracle", "per_seed")
            }
            e["pools"][pool]["preregistered"] = h["preregistration"]["preregistered"]
            e["pools"][pool]["best_after_the_fact"] = results["compute"]["best_after_the_fact"][pool]
    return out
