"""The simulation study's committed results, regenerated from its records alone (nothing is simulated again).

    python -m studies.allocators_sim.regenerate        # allocators_sim.{json,png}, simulate_hard_pool.{json,png}

`allocators_sim`: every arm's curves per seed (`run`), summarised against the reference arm's target and budget
(`run.summarise`), the tables printed, the JSON written without the curves (they are in the records) and the figure
drawn from them. `simulate_hard_pool`: `reinforce-ada simulate`'s result (the command is in its JSON), its summary
and per-step medians recomputed from the runs (`simulation.simulate`), the figure drawn by the package.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

from studies.protocol import records

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
RECORDS = RESULTS / "records.jsonl.gz"


def write_sim(ctx: dict[str, Any], runs: dict[str, dict[str, Any]], out: Path) -> dict[str, Any]:
    """`allocators_sim`: JSON (summaries) and PNG from the runs the context lists."""
    from studies.allocators_sim.report import ARMS, PROBE_ARMS, REFERENCE, plot, rounded, summarise, table

    meta, blocks = ctx["meta"], records.runs_of(ctx, runs)
    by_arm: dict[str, dict[str, list[dict]]] = {}
    for block, rs in blocks.items():
        for r in rs:
            by_arm.setdefault(block, {}).setdefault(r["arm"], []).append(r)
    main = by_arm["main"]
    target_step = meta["settings"]["target_step"]
    ref = main[REFERENCE]
    target = float(np.median([c["pass_rate"][target_step] for c in ref]))
    budget = float(np.median([c["samples"][-1] for c in ref]))
    summary = summarise(main, target, budget, ref)
    title = f"\ntarget pass rate {target:.4f} (grpo-n4 at step {target_step}); ref budget {budget:.0f}"
    print(table(title, summary, ARMS))
    result = {k: meta[k] for k in ("command", "date", "machine", "settings", "pool")}
    result.update(target_pass_rate=target, reference_budget_samples=budget)
    result["arms"] = {name: {"spec": ARMS[name], "summary": summary[name]} for name in main}
    if "probe" in by_arm:
        probe = {name: ARMS[name] for name in PROBE_ARMS}
        psum = summarise(by_arm["probe"], target, budget, ref)
        print(table("\nfeatures=probe (hidden state assumed to carry a noisy difficulty reading)", psum, probe))
        result["probe"] = {name: {"spec": probe[name], "summary": psum[name]} for name in probe}
    result["wall_s"] = meta["wall_s"]
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{ctx['name']}.json").write_text(json.dumps(rounded(result), indent=1))
    plot(main, target, budget, out / f"{ctx['name']}.png")
    return result


def write_simulate(ctx: dict[str, Any], runs: dict[str, dict[str, Any]], out: Path) -> dict[str, Any]:
    """`simulate_hard_pool`: `simulation.simulate`'s summary and medians per arm from its runs; JSON without runs."""
    from reinforce_ada.simulation.simulate import plot_results

    per_arm = records.runs_of(ctx, runs)
    result = {k: v for k, v in ctx["meta"].items() if k != "arms"}
    result["arms"] = {}
    for label, config in ctx["meta"]["arms"].items():
        rs = [{k: v for k, v in r.items() if k not in ("id", "arm", "seed")} for r in per_arm[label]]
        med = {k: np.median([r[k] for r in rs], axis=0).tolist() for k in rs[0]}
        summary = {
            "final_pass_rate": float(np.median([r["pass_rate"][-1] for r in rs])),
            "zero_signal_share": float(np.median([np.mean(r["zero_signal"]) for r in rs])),
            "samples_per_step": float(np.median([np.mean(r["samples_per_step"]) for r in rs])),
        }
        result["arms"][label] = {"config": config, "summary": summary, "median": med, "runs": rs}
    written = {**result, "arms": {a: {k: v for k, v in e.items() if k != "runs"} for a, e in result["arms"].items()}}
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{ctx['name']}.json").write_text(json.dumps(written, indent=1))
    plot_results(result, out / f"{ctx['name']}.png")
    return result


def regenerate(out: Path = RESULTS, records_file: Path = RECORDS) -> None:
    runs, contexts = records.read(records_file)
    write_sim(contexts["allocators_sim"], runs, out)
    write_simulate(contexts["simulate_hard_pool"], runs, out)
    print(f"wrote {out}/allocators_sim.{{json,png}} and {out}/simulate_hard_pool.{{json,png}}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m studies.allocators_sim.regenerate", description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=str(RESULTS), help="where the results go (default: the committed results/)")
    out = Path(ap.parse_args(argv).out)
    with records.explained():  # a records file that is not whole: one line naming it
        if out.resolve() == RESULTS.resolve():
            records.seal_all(RESULTS)
        regenerate(out, RECORDS)
    return 0


if __name__ == "__main__":
    sys.exit(main())
