"""The SmolLM2 study's committed results, regenerated from its records alone (nothing is trained).

    python -m studies.llm_convergence.regenerate     # llm_convergence.{json,png}, smollm2_run.{json,png}, summary.json
                                                     # and each later registration's results/<name>/ the same way

`llm_convergence`: the registered runs' analysis (`study.analyse`: every arm against GRPO-n4 on steps, tokens, CPU and
process seconds), the headline figures L1, L2, L2p checked against the registration as it was (`study.headline`),
the lr sweep's choice (`study.chosen_lr`), the testbed's factors beside SmolLM2's (`testbed`: read from the
compute-to-target study's committed results) and the figure (`plot`); summary.json's L-entries with the command and
date they were written with. `smollm2_run`: the first, unregistered 30-step run (`first_run`), its JSON and figure.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from studies.protocol import records

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
RECORDS = RESULTS / "records.jsonl.gz"


def write_llm(ctx: dict[str, Any], runs: dict[str, dict[str, Any]], out: Path, summary: bool = True) -> dict:
    """The study's result JSON and PNG (and, with `summary`, its L-entries in summary.json) from the runs the context
    lists; returns the result with its runs."""
    from studies.llm_convergence.plot import plot
    from studies.llm_convergence.study import analyse, chosen_lr, headline

    meta, reg = ctx["meta"], ctx["registration"]
    inst = meta["instrument"]
    every = [{k: v for k, v in runs[i].items() if k != "id"} for i in ctx["runs"]["all"]]
    main = [r for r in every if r["key"] in set(ctx["runs"]["main"])]
    analysis = None
    if any(r["arm"] == "grpo-n4" for r in main):
        analysis = analyse(main, inst["targets"], inst.get("min_shared_gain", 1e-4))
    sweeps = {"grpo-n4": dict(meta["lr_sweep"])} | {a: dict(v) for a, v in meta.get("lr_sweeps", {}).items()}
    for arm, sweep in sweeps.items():  # the choice from each sweep's runs; its grid, growth and note as recorded
        grid = {f"{lr:g}" for lr in sweep.get("grid", [])}
        done = [r for r in every if r["phase"] == "sweep" and r["arm"] == arm and f"{r['lr']:g}" in grid]
        if done:
            sweep.update(chosen_lr(done))
    sweep = sweeps["grpo-n4"]
    run = {k: inst[k] for k in ("steps", "eval_prompts", "eval", "batch_size", "max_new_tokens")}
    head = headline(analysis, reg, meta["preregistration_file"], run, ctx.get("deviations", []))
    if meta.get("smoke"):
        for e in head.values():
            e.update(preregistered=False, why_not_preregistered=["--smoke run"])
    res = {**{k: meta[k] for k in ("command", "date", "partial", "smoke", "preregistration_file", "instrument")}}
    res.update(model=meta["model"], lr_sweep=sweep, grpo_matched=meta["grpo_matched"], analysis=analysis)
    if "lr_sweeps" in meta:  # arms swept besides GRPO-n4 (a later registration's)
        res["lr_sweeps"] = {a: v for a, v in sweeps.items() if a != "grpo-n4"}
    res.update(headline=head, testbed=testbed_comparison(analysis) if analysis else None, runs=every)
    out.mkdir(parents=True, exist_ok=True)
    tmp = out / f".{ctx['name']}.json.tmp"
    tmp.write_text(json.dumps(_clean({**res, "runs": ctx["runs"]}), indent=1, default=str) + "\n")
    tmp.replace(out / f"{ctx['name']}.json")
    if analysis:
        plot(res, out / f"{ctx['name']}.png")
    if summary:
        from studies.protocol.summary import read_summary, stamped, write_summary

        path = out / "summary.json"
        old = read_summary(path)
        stamp = ctx.get("summary", {"command": meta["command"], "date": meta["date"]})
        write_summary(path, {**old, **json.loads(json.dumps(_clean(stamped(head, **stamp))))})
    return res


def testbed_comparison(analysis: dict[str, Any]) -> dict[str, Any]:
    """Each arm's tokens factor on SmolLM2 beside the testbed's on its four pools (`testbed`); a testbed that cannot
    be read is reported under `error`, never stopping the study."""
    from studies.llm_convergence.testbed import REFERENCE, compare, load_testbed

    try:
        return compare(analysis, load_testbed([a for a in analysis["table"] if a != REFERENCE]))
    except Exception as e:  # a side report: whatever goes wrong is written down, the study goes on
        return {"error": f"the testbed's results could not be read: {type(e).__name__}: {e}"}


def _clean(x: Any) -> Any:
    """JSON-safe: NaN and inf become null, numpy scalars plain numbers (json.dumps never calls `default` on floats)."""
    import math

    if isinstance(x, dict):
        return {k: _clean(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [_clean(v) for v in x]
    if hasattr(x, "item") and not isinstance(x, str | bytes):
        x = x.item()
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x


def regenerate(out: Path = RESULTS, records_file: Path = RECORDS) -> None:
    from studies.llm_convergence.first_run import from_records, write

    runs, contexts = records.read(records_file)
    write_llm(contexts["llm_convergence"], runs, out)
    write(from_records(contexts["smollm2_run"], runs), out / "smollm2_run")
    print(f"wrote {out}/llm_convergence.{{json,png}}, {out}/smollm2_run.{{json,png}} and {out}/summary.json")
    for name in later_registrations(records_file.parent):
        runs, contexts = records.read(records_file.parent / name / "records.jsonl.gz")
        if name in contexts:
            write_llm(contexts[name], runs, out / name)
            print(f"wrote {out}/{name}/{name}.json (and its figure and summary.json)")


def later_registrations(results: Path = RESULTS) -> list[str]:
    """The later registrations' names: each keeps its records, result and summary.json in `results/<name>/` (a
    folder is one once its first run wrote all three; `docgen` reads the same folders by their summary.json)."""
    return sorted(
        p.parent.name
        for p in results.glob("*/records.jsonl.gz")
        if (p.parent / f"{p.parent.name}.json").exists() and (p.parent / "summary.json").exists()
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m studies.llm_convergence.regenerate", description=__doc__.split("\n")[0]
    )
    ap.add_argument("--out", default=str(RESULTS), help="where the results go (default: the committed results/)")
    out = Path(ap.parse_args(argv).out)
    with records.explained():  # a records file or summary that is not whole: one line naming it
        if out.resolve() == RESULTS.resolve():
            records.seal_all(RESULTS)
        regenerate(out, RECORDS)
    return 0


if __name__ == "__main__":
    sys.exit(main())
