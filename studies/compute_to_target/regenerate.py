"""Every committed result of the compute-to-target study, regenerated from its records alone (nothing is trained).

    python -m studies.compute_to_target.regenerate             # every result JSON + PNG and results/summary.json
    python -m studies.compute_to_target.regenerate --only compute_to_target_mixed_tiebreak --out /tmp/ctt

For each result the records file lists (`protocol.records`), in name order so that a first run is written before
its re-run reads it: the runs it reads are rebuilt into a `compare` result with this checkout's analysis
(`protocol.compare_results.rebuild`: the lr choice, each pool's table and compute-to-target table, the goals, C0-C3
against the registration as it was and as it stood when the result was first committed, `protocol.prereg.first_quoted`,
which reads the git history), then what the study script added: `partial`, the re-run's `agreement` with its
first run (`rerun`), the tie-break's reading (`tiebreak`). The result JSON keeps its committed keys, with each run
named by its record id instead of its curves; the PNG is drawn from the runs; summary.json's C-entries are read from
the results with the command and date they were written with.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from reinforce_ada.bench.report import _rounded, plot, write_json
from studies.compute_to_target.rerun import agreement_with_first
from studies.compute_to_target.study import RECORDS, RESULTS, partial, registration_path
from studies.compute_to_target.tiebreak import load_tiebreak, result_names, tiebreak
from studies.protocol import records
from studies.protocol.compare_results import rebuild, shape
from studies.protocol.headlines import summary_entries
from studies.protocol.prereg import first_quoted
from studies.protocol.summary import merge_pools, read_summary, stamped, write_summary


def regenerate_one(ctx: dict[str, Any], runs: dict[str, dict[str, Any]], out: Path) -> dict[str, Any]:
    """One result rebuilt from `runs` (every run of the records file, by id) into `out` (JSON and PNG); returns it
    with its runs."""
    phases = records.runs_of(ctx, runs)
    sk = ctx["skeleton"]
    meta = ctx["meta"]
    if meta.get("registration"):  # each claim against the registration as it stood when this result was first committed
        quoted = first_quoted(registration_path(meta["registration"]["path"]), RESULTS / f"{ctx['name']}.json")
        meta = {**meta, "registration": {**meta["registration"], "first_quoted": quoted}}
    res = rebuild(meta, phases, tables="compute" in sk["by_pool"])
    reg = (ctx["meta"].get("registration") or {}).get("content")
    pools = list(ctx["meta"]["pools"])
    if "partial" in sk["top"]:
        registered = pools if reg.get("rerun_of") else list(reg["instrument"]["pools"])
        res["partial"] = partial(res, reg, pools, registered)
    if "agreement" in sk["top"]:
        res["agreement"] = agreement_with_first(res, reg, pools[0], out)
    if "tiebreak" in sk["top"]:
        tb = load_tiebreak(registration_path(ctx["tiebreak_registration"]))
        tb["_path"] = ctx["tiebreak_registration"]  # the name it was registered under, as the reading recorded it
        res["tiebreak"] = tiebreak(tb, [(f"{n}.json", _stored_runs(n, runs, out)) for n in result_names(tb)])
    written = shape(res, sk)
    written["runs"] = ctx["runs"]  # the record ids, per phase: the curves are in the records file
    write_json(written, out / f"{ctx['name']}.json")
    plot(res, out / f"{ctx['name']}.png")
    return res


def _stored_runs(name: str, runs: dict[str, dict[str, Any]], out: Path) -> dict[str, Any] | None:
    """A result's main runs as its JSON stored them when the tie-break was read (4 significant digits); None when
    the records hold no such result."""
    ctx = _contexts.get(name)
    if ctx is None:
        return None
    return {"runs": {"main": [_rounded(r) for r in records.runs_of(ctx, runs)["main"]]}}


_contexts: dict[str, dict[str, Any]] = {}


def regenerate(out: Path = RESULTS, only: list[str] | None = None, records_file: Path = RECORDS) -> list[str]:
    """Every result (or `only` those) into `out`, and summary.json when every result is regenerated; returns the
    names written."""
    runs, results = records.read(records_file)
    _contexts.clear()
    _contexts.update(results)
    names = sorted(results) if not only else only
    unknown = sorted(set(names) - set(results))
    if unknown:
        raise SystemExit(f"no result {unknown} in {records_file}; it holds {sorted(results)}")
    out.mkdir(parents=True, exist_ok=True)
    entries: list[tuple[int, str, dict[str, Any]]] = []
    for name in names:
        res = regenerate_one(results[name], runs, out)
        print(f"wrote {out / name}.json and .png", flush=True)
        if results[name].get("summary") is not None:
            entries.append(summary_of(results[name], res))
    if not only:
        summary: dict[str, Any] = {}
        for _, _, e in sorted(entries):  # in the order they were written: a later tranche's stamp stands
            summary = merge_pools(summary, e)
        write_summary(out / "summary.json", summary)
        print(f"wrote {out / 'summary.json'}")
    return names


def summary_of(ctx: dict[str, Any], res: dict[str, Any]) -> tuple[int, str, dict[str, Any]]:
    """(order, name, summary.json entries) of one result: its C-figures, tagged by registration, stamped."""
    stamp = ctx["summary"]
    figs = summary_entries(res, ctx["meta"]["registration"]["content"])
    tagged = {f"{k}[{stamp['tag']}]" if stamp["tag"] else k: v for k, v in figs.items()}
    entries = json.loads(json.dumps(stamped(tagged, stamp["command"], stamp["date"])))  # tuples as JSON lists
    return stamp["order"], ctx["name"], entries


def refresh(name: str, summary: bool, out: Path = RESULTS) -> None:
    """One result newly recorded: written, and (with `summary`) its figures merged into summary.json."""
    runs, results = records.read(RECORDS)
    _contexts.clear()
    _contexts.update(results)
    res = regenerate_one(results[name], runs, out)
    print(f"wrote {out / name}.json and .png", flush=True)
    if summary and results[name].get("summary") is not None:
        path = out / "summary.json"
        old = read_summary(path)
        write_summary(path, merge_pools(old, summary_of(results[name], res)[2]))
        print(f"updated {path}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m studies.compute_to_target.regenerate", description=__doc__.split("\n")[0]
    )
    ap.add_argument("--out", default=str(RESULTS), help="where the results go (default: the committed results/)")
    ap.add_argument("--only", default=None, help="comma-separated result names (a first run before its re-run)")
    args = ap.parse_args(argv)
    with records.explained():  # a records file or summary that is not whole: one line naming it
        if Path(args.out).resolve() == RESULTS.resolve():
            records.seal_all(RESULTS)
        regenerate(Path(args.out), args.only.split(",") if args.only else None, RECORDS)
    return 0


if __name__ == "__main__":
    sys.exit(main())
