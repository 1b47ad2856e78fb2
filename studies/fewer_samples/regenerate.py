"""The fewer-samples study's committed result, regenerated from its records alone (nothing is trained).

    python -m studies.fewer_samples.regenerate                  # results/fewer_samples.{json,png}
    python -m studies.fewer_samples.regenerate --out /tmp/fs    # somewhere else

A later registration's records (`results/<name>/records.jsonl.gz`) regenerate into `<out>/<name>/` beside it.

The records file (`protocol.records`) holds every run, compacted, and the result's context (settings, machine,
testbed, the registration as it was, the command); the figures are recomputed with this checkout's analysis
(`analysis`): per pool the compute-to-target table, the equal-token table, the baselines' errors, how far the grid
moves the old reference, and every registered claim with its verdict.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

from studies.fewer_samples.study import RECORDS, RESULTS, later_registrations, live_arms, pool_names


def partial(ctx: dict[str, Any], runs: dict[str, list[dict[str, Any]]]) -> str | None:
    """None when every registered arm has every registered seed on every registered pool; else what is missing."""
    reg = ctx["meta"]["registration"]["content"]
    inst = reg["instrument"]
    have: dict[tuple[str, str], set[int]] = {}
    for r in runs["main"]:
        have.setdefault((r["pool"], r["arm"]), set()).add(int(r["seed"]))
    missing = []
    for pool in pool_names(reg):
        for arm in live_arms(reg):  # an arm a dated amendment stopped is not missing
            got = have.get((pool, arm), set())
            if set(inst["seeds"]) - got:
                missing.append(f"{pool}/{arm}: {len(got & set(inst['seeds']))} of {len(inst['seeds'])} seeds")
    return "; ".join(missing) if missing else None


def write(ctx: dict[str, Any], runs: dict[str, list[dict[str, Any]]], out: Path = RESULTS) -> dict[str, Any]:
    """The result of `ctx` from its runs: JSON and PNG under `out`; returns the result."""
    from reinforce_ada.bench.report import write_json
    from studies.fewer_samples.analysis import figures

    reg = ctx["meta"]["registration"]["content"]
    pools = [p for p in pool_names(reg) if any(r["pool"] == p for r in runs["main"])]
    res: dict[str, Any] = {**ctx["meta"], **figures({"runs": runs, "config": ctx["meta"].get("config")}, reg, pools)}
    res["partial"] = partial(ctx, runs)
    res["runs"] = ctx["runs"]
    write_json(res, out / f"{ctx['name']}.json")
    plot(res, runs, out / f"{ctx['name']}.png")
    return res


def plot(res: dict[str, Any], runs: dict[str, list[dict[str, Any]]], png: Path) -> None:
    """Top: accuracy against generated tokens (median over seeds) of the best uniform arm and the SPO arms, per pool;
    bottom: every arm's accuracy at the budget minus the best uniform arm's, with its 90% interval."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    pools = list(res["by_pool"])
    fig, ax = plt.subplots(2, max(1, len(pools)), figsize=(4.5 * max(1, len(pools)), 8.5), squeeze=False)
    for j, pool in enumerate(pools):
        f = res["by_pool"][pool]
        best = f["equal_tokens"]["best_uniform"]
        for arm in [best, *[a for a in f["equal_tokens"]["arms"] if a.startswith("spo-") and "-" not in a[4:]]]:
            rs = [r for r in runs["main"] if r["pool"] == pool and r["arm"] == arm]
            if not rs:
                continue
            n = min(len(r["eval_tokens"]) for r in rs)
            x = np.median([r["eval_tokens"][:n] for r in rs], axis=0)
            y = np.median([r["accuracy"][:n] for r in rs], axis=0)
            ax[0][j].plot(x, y, label=f"{arm}{' (best uniform)' if arm == best else ''}")
        ax[0][j].set(title=pool, xlabel="generated tokens", ylabel="held-out accuracy")
        ax[0][j].legend(fontsize=7)
        rows = sorted(f["equal_tokens"]["arms"].items(), key=lambda kv: (kv[1]["diff"] is None, kv[1]["diff"] or 0))
        names = [a for a, _ in rows]
        d = [v["diff"] if v["diff"] is not None else np.nan for _, v in rows]
        lo = [v["diff_interval"][0] if v["diff_interval"][0] is not None else np.nan for _, v in rows]
        hi = [v["diff_interval"][1] if v["diff_interval"][1] is not None else np.nan for _, v in rows]
        err = np.array([np.subtract(d, lo), np.subtract(hi, d)])
        ax[1][j].barh(names, d, xerr=np.nan_to_num(err), color=["C3" if n.startswith("spo") else "C0" for n in names])
        ax[1][j].axvline(0, color="k", lw=0.8)
        ax[1][j].set(xlabel=f"accuracy at {res['by_pool'][pool]['equal_tokens']['budget_tokens']:g} tokens - {best}")
        ax[1][j].tick_params(axis="y", labelsize=7)
    fig.suptitle("Fewer samples, more prompts: SPO against the grid of uniform GRPO at equal tokens")
    fig.tight_layout()
    png.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(png, dpi=110)
    plt.close(fig)


def main(argv: list[str]) -> int:
    from studies.protocol import records

    ap = argparse.ArgumentParser(prog="python -m studies.fewer_samples.regenerate", description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=str(RESULTS), help="where the result goes (default: results/, the committed one)")
    args = ap.parse_args(argv)
    if not RECORDS.exists():
        raise SystemExit(
            f"{RECORDS} does not exist: the study has no recorded runs yet (python -m studies.fewer_samples.run)"
        )
    with records.explained():  # a records file that is not whole: one line naming it
        if Path(args.out).resolve() == RESULTS.resolve():
            records.seal_all(RESULTS)
        return _regenerate(Path(args.out))


def _regenerate(out_root: Path) -> int:
    from studies.protocol import records

    places = [(RECORDS, out_root)]
    places += [(RESULTS / name / RECORDS.name, out_root / name) for name in later_registrations(RESULTS)]
    for records_file, out in places:
        runs, results = records.read(records_file)
        for ctx in results.values():
            res = write(ctx, records.runs_of(ctx, runs), out)
            verdicts = json.dumps({k: v.get("verdict") for k, v in res["claims"].items()})
            print(
                f"wrote {out / ctx['name']}.json and .png"
                + (f" (partial: {res['partial'][:200]}); interim, on the runs so far: " if res["partial"] else ": ")
                + verdicts
            )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
