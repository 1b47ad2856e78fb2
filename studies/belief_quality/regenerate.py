"""The belief-quality study's committed result, regenerated from its records alone (nothing is replayed again).

    python -m studies.belief_quality.regenerate        # belief_quality.{json,png}

Per pool and belief, each seed's replay scores (`run`: the admitted prompts' mean P(signal), the candidates' mean,
the Spearman correlation, all after the burn-in) become the belief's mean with its 90% t-interval, its share of the
oracle's gain over uniform admission, and the figure.
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


def write_belief(ctx: dict[str, Any], runs: dict[str, dict[str, Any]], out: Path) -> dict[str, Any]:
    """The result JSON and PNG from the runs the context lists."""
    from studies.belief_quality.belief import gain_share
    from studies.belief_quality.report import BELIEFS, _fmt, _plot, t_interval

    results = json.loads(json.dumps(ctx["meta"]))
    print(f"{'pool':8} {'belief':20} {'P(signal)':>22} {'gain share':>22} {'spearman':>22}")
    for pool, rs in records.runs_of(ctx, runs).items():
        by = {b: sorted((r for r in rs if r["belief"] == b), key=lambda r: r["seed"]) for b in BELIEFS}
        uni = np.array([r["candidates"] for r in by["oracle"]])
        orc = np.array([r["admitted"] for r in by["oracle"]])
        entry = results["pools"][pool]
        entry["beliefs"] = {"uniform": {"signal": t_interval(uni)}}
        print(f"{pool:8} {'uniform':20} {_fmt(t_interval(uni))}")
        for belief, seeds in by.items():
            sig = np.array([r["admitted"] for r in seeds])
            share = np.array([gain_share(s, u, o) for s, u, o in zip(sig, uni, orc, strict=True)])
            rho = np.array([r["spearman"] for r in seeds])
            e = {"signal": t_interval(sig), "gain_share": t_interval(share), "spearman": t_interval(rho)}
            entry["beliefs"][belief] = e
            print(f"{pool:8} {belief:20} {_fmt(e['signal'])} {_fmt(e['gain_share'])} {_fmt(e['spearman'])}")
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{ctx['name']}.json").write_text(json.dumps(results, indent=2) + "\n")
    _plot(results, out / f"{ctx['name']}.png")
    return results


def regenerate(out: Path = RESULTS, records_file: Path = RECORDS) -> None:
    runs, contexts = records.read(records_file)
    write_belief(contexts["belief_quality"], runs, out)
    print(f"wrote {out}/belief_quality.{{json,png}}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m studies.belief_quality.regenerate", description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=str(RESULTS), help="where the results go (default: the committed results/)")
    out = Path(ap.parse_args(argv).out)
    with records.explained():  # a records file that is not whole: one line naming it
        if out.resolve() == RESULTS.resolve():
            records.seal_all(RESULTS)
        regenerate(out, RECORDS)
    return 0


if __name__ == "__main__":
    sys.exit(main())
