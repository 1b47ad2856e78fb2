"""The registered SmolLM2 study over one work folder (`Study`): each run's spec, GRPO-n4's lr sweep (grown at an edge),
budget-matched GRPO's n, the main runs (resumed, skipped once finished) and the results written after every run;
`committed_runs`: the runs of the committed records that count as finished. `run` is its command line; the module
docstring there says what the study does and why.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import hashlib
import json
import os
from pathlib import Path
from typing import Any

from studies.llm_convergence.run_one import RunSpec, run_one
from studies.llm_convergence.task import cached_model, make_task

FROZEN_ENV = "REINFORCE_ADA_FROZEN_CODE"
"""Set to the registered commit by the parent process that runs it from a frozen worktree (`--here` alone is not)."""


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
            self.work / "data",
            levels,
            self.inst["train_prompts"],
            self.inst["eval_prompts"],
            self.inst.get("ask", "number"),
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
            phase=phase,
            arm=arm,
            strategy=strategy,
            lr=lr,
            seed=seed,
            folder=str((self.work / "runs" / phase / arm / f"lr{lr:g}" / f"seed{seed}").resolve()),
            model=str(Path(self.model).resolve()),
            template=self.args.template,
            train_path=str(self.train_path.resolve()),
            eval_path=str(self.eval_path.resolve()),
            steps=i["steps"],
            batch_size=batch_size,
            eval_every=i["eval_every"],
            eval=i["eval"],
            eval_samples=i["eval_samples"],
            check_samples=i["check_samples"],
            max_new_tokens=i["max_new_tokens"],
            lora_r=i["lora_r"],
            threads=self.args.threads,
            data=self.data,
            verifier=i.get("verifier", "numeric"),
            generation_batch=i.get("generation_batch", 128),
            micro_batch=i.get("micro_batch", 32),
        )

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
        print(
            f"{rec['key']}: {'skipped (finished)' if rec.get('skipped') else 'done'}, accuracy "
            f"{rec['accuracy'][0]:.3f} -> {rec['accuracy'][-1]:.3f}",
            flush=True,
        )
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
            self.run(
                [self.spec("sweep", arm, self.strategy(arm), lr, s) for lr in lrs for s in self.inst["sweep_seeds"]]
            )
            grid = {f"{lr:g}" for lr in lrs}  # this grid's runs only: a resumed study holds the grown grid's runs
            done = [
                r for r in self.records.values() if r["phase"] == "sweep" and r["arm"] == arm and f"{r['lr']:g}" in grid
            ]
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
                raise SystemExit(
                    "budget-matched GRPO's n needs the start model's exact rates: no GRPO-n4 run has "
                    "finished yet (run without --report-only, or register matched_n)"
                )
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
            "partial": (
                f"{len(missing)} registered runs not finished: {missing[:8]}"
                if missing
                else None
                if missing is not None
                else "the plan is not known yet (lr sweep unfinished)"
            ),
            "smoke": self.args.smoke,
            "preregistration_file": self.prov,
            "instrument": self.inst,
            "model": self.model,
            "lr_sweep": self.sweep,
            "grpo_matched": self.matched,
        }
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
