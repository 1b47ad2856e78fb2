"""Every committed result of the convergence study, regenerated from its records alone (nothing is trained).

    python -m studies.convergence.regenerate          # convergence, convergence_rerun, allocators_compare (JSON +
                                                     # PNG), allocator_goals.json and results/summary.json
    python -m studies.convergence.regenerate --out /tmp/conv

Each `compare` result is rebuilt from its runs (`protocol.compare_results.rebuild`: the lr choice, each pool's table
and goals P1-P4) and written with the keys it was committed with; the re-run's `agreement` is read against the
regenerated first run; the best-adaptive-arm goals (`allocator_goals`) from `allocators_compare` and `convergence`.
The runs are the ones the result JSONs held (their per-step series at 4 significant digits: the full records of
these runs were never committed), so the figures regenerated from them can differ from the first report in the
fourth digit; the committed results are the regenerated ones.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from reinforce_ada.bench.report import plot, write_json
from studies.convergence import allocator_goals
from studies.protocol import records
from studies.protocol.compare_results import rebuild, shape
from studies.protocol.goals import agreement
from studies.protocol.summary import stamped, write_summary

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
RECORDS = RESULTS / "records.jsonl.gz"
ORDER = ("convergence", "convergence_rerun", "allocators_compare")
"""A first run before the re-run that is checked against it."""


def regenerate(out: Path = RESULTS, records_file: Path = RECORDS) -> dict[str, dict[str, Any]]:
    """Every result into `out`; returns them (with their runs) by name."""
    runs, contexts = records.read(records_file)
    done: dict[str, dict[str, Any]] = {}
    out.mkdir(parents=True, exist_ok=True)
    compares = [n for n in ORDER if n in contexts] + sorted(n for n in contexts if "skeleton" in contexts[n])
    for name in dict.fromkeys(compares):
        ctx = contexts[name]
        res = rebuild(ctx["meta"], records.runs_of(ctx, runs), tables=False)
        if "agreement" in ctx["skeleton"]["top"]:
            first = Path(ctx["check_against"]).stem
            res["agreement"] = {"with": ctx["check_against"], "pools": agreement(_as_written(done[first]), res)}
        written = shape(res, ctx["skeleton"])
        written["runs"] = ctx["runs"]
        write_json(written, out / f"{name}.json")
        plot(res, out / f"{name}.png")
        done[name] = res
        print(f"wrote {out / name}.json and .png", flush=True)
    entries: dict[str, Any] = {}
    if "allocator_goals" in contexts and {"allocators_compare", "convergence"} <= set(done):
        goals_ctx = contexts["allocator_goals"]
        goals = allocator_goals.best_adaptive(
            _as_written(done["allocators_compare"]) | {"runs": done["allocators_compare"]["runs"]},
            _as_written(done["convergence"]),
        )
        (out / "allocator_goals.json").write_text(
            json.dumps({"goals": goals, "sources": goals_ctx["sources"]}, indent=1) + "\n"
        )
        print(allocator_goals.table(goals))
        entries.update(allocator_goals.summary_entries(goals, goals_ctx["command"], goals_ctx["source"]))
    stamp = contexts.get("convergence", {}).get("summary")
    if stamp is not None and "convergence" in done:  # P4 belongs to benchmarks/step_time.py: this run's is nested
        first = _as_written(done["convergence"])
        entries.update(stamped({k: v for k, v in first["goals"].items() if k != "P4"}, stamp["command"], stamp["date"]))
        entries["P4"] = {"convergence_run": stamped({"P4": first["goals"]["P4"]}, **stamp["p4"])["P4"]}
    if entries:
        write_summary(out / "summary.json", entries)
        print(f"wrote {out / 'summary.json'}")
    return done


def _as_written(res: dict[str, Any]) -> dict[str, Any]:
    """A result as its JSON reads back (floats at 4 significant digits): what later readings were taken from."""
    from reinforce_ada.bench.report import _jsonable, _rounded

    return json.loads(json.dumps(_rounded({k: v for k, v in res.items() if k != "runs"}), default=_jsonable))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m studies.convergence.regenerate", description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=str(RESULTS), help="where the results go (default: the committed results/)")
    args = ap.parse_args(argv)
    with records.explained():  # a records file that is not whole: one line naming it
        if Path(args.out).resolve() == RESULTS.resolve():
            records.seal_all(RESULTS)
        regenerate(Path(args.out), RECORDS)
    return 0


if __name__ == "__main__":
    sys.exit(main())
