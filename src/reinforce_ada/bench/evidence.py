"""What a comparison's own numbers can support: read before its tables, so a short run is not taken for a result.

The registered results (`docs/results/compute_to_target.md`, `docs/results/convergence.md`) ran the protocol's horizon:
`CompareConfig`'s defaults, 200 steps, 9 seeds of the headline arms, an evaluation every 10 steps. A factor here is
read from per-seed curves, so its interval can only be as good as the horizon behind it. The rules, fixed here and
not tuned to any result:
1) Seeds: a factor needs at least `MIN_SEEDS` seeds. With 3, its t-interval has 2 degrees of freedom and rests on
   three draws; three seeds that agree give a narrow interval that says little (the quick run's MoPPS "1.35 [1.05,
   1.75]" on `hard` against the registered 1.03 [0.89, 1.19]).
2) Evaluations: a run needs at least `MIN_EVALS` evaluations. A curve of E points places the step where it reaches
   a target only to within one evaluation interval, a 1/E share of the horizon, whatever the seeds say.
3) Spread: an interval wider than `MAX_SPREAD` (hi / lo) does not measure a factor.
A run that breaks 1 or 2 for its headline arms is a smoke test: `note` says so first, points to the registered
results and counts the factors its intervals can support; `figure_title` says it on the figure.
"""

from __future__ import annotations

from typing import Any

MIN_SEEDS = 5
MIN_EVALS = 10
MAX_SPREAD = 2.0
REGISTERED = "docs/results/compute_to_target.md and docs/results/convergence.md"
"""Where the registered results are (the repository's docs; the docs site's Results pages)."""


def evaluations(config: dict[str, Any]) -> int:
    """Evaluations per run after the start: `eval_points` with a token budget, else steps / eval_every."""
    if config.get("token_budget"):
        return int(config.get("eval_points") or 0)
    return int(config["steps"]) // max(1, int(config.get("eval_every") or 1))


def factors(results: dict[str, Any]) -> list[tuple[str, dict[str, Any], int]]:
    """(what, interval, seeds) of every factor the tables print with an interval: each arm's time-scale factor on
    steps against the reference, and its tokens to target against the best uniform arm (the unit arms left out)."""
    out = []
    for pool, s in results.get("by_pool", {}).items():
        for arm, r in s.get("table", {}).items():
            k = r.get("k_steps") or {}
            interval = {"value": k.get("value"), "lo": k.get("lo"), "hi": k.get("hi")}
            out.append((f"{pool}/{arm} k steps", interval, len(r.get("seeds", ()))))
        comp = s.get("compute") or {}
        unit = comp.get("axes", {}).get("tokens", {}).get("best_uniform")
        for arm, r in comp.get("table", {}).items():
            t = r.get("tokens") or {}
            interval = {"value": t.get("value"), "lo": t.get("t_lo"), "hi": t.get("t_hi")}
            if arm != unit:
                out.append((f"{pool}/{arm} tokens to target", interval, len(r.get("seeds", ()))))
    return [f for f in out if f[1]["value"] is not None and not f[1]["value"] == f[1]["lo"] == f[1]["hi"]]


def why_not(interval: dict[str, Any], seeds: int, evals: int) -> list[str]:
    """The rules (module docstring) a factor breaks; empty when its interval can support it."""
    why = []
    if seeds < MIN_SEEDS:
        why.append(f"{seeds} seeds < {MIN_SEEDS}")
    if evals < MIN_EVALS:
        why.append(f"{evals} evaluations per run < {MIN_EVALS}")
    lo, hi = interval.get("lo"), interval.get("hi")
    if lo is None or hi is None or lo <= 0:  # a factor's interval is a positive range (a ratio of costs)
        why.append("no interval")
    elif hi / lo > MAX_SPREAD:
        why.append(f"interval wider than {MAX_SPREAD:g}x")
    return why


def smoke_test(results: dict[str, Any]) -> bool:
    """Whether the run is too short for its factors to be a result (rules 1-2 for its headline seeds)."""
    c = results["config"]
    return int(c.get("seeds") or 0) < MIN_SEEDS or evaluations(c) < MIN_EVALS


def note(results: dict[str, Any]) -> str:
    """The lines printed before the tables: a smoke test says so and where the results are; any run says how many
    of its factors its own intervals support, and why the others cannot."""
    c, evals = results["config"], evaluations(results["config"])
    lines = []
    if smoke_test(results):
        lines += [
            f"SMOKE TEST, NOT A RESULT: {c['steps']} steps x {c.get('seeds')} seeds, {evals} evaluations per run "
            f"(the registered protocol: 200 steps x 9 seeds, 20 evaluations).",
            "Its factors check that every arm runs end to end; they are not evidence of which sampler is faster. "
            f"The registered results: {REGISTERED}.",
        ]
    found = factors(results)
    reasons: dict[str, int] = {}
    for _, interval, seeds in found:
        for why in why_not(interval, seeds, evals):
            reasons[why] = reasons.get(why, 0) + 1
    held = sum(not why_not(interval, seeds, evals) for _, interval, seeds in found)
    if found and held < len(found):
        said = "; ".join(f"{n} with {why}" for why, n in reasons.items())
        lines.append(f"Its own intervals support {held} of {len(found)} factors (the others: {said}).")
    return "\n".join(lines)


def figure_title(results: dict[str, Any]) -> str | None:
    """The figure's title for a smoke test (None otherwise)."""
    if not smoke_test(results):
        return None
    c = results["config"]
    return (
        f"smoke test ({c['steps']} steps x {c.get('seeds')} seeds, {evaluations(c)} evaluations per run): its "
        f"factors are not a result; the registered results are in {REGISTERED}"
    )
