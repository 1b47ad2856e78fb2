"""One run of the real-model study: train, resume or skip one (phase, arm, lr, seed) in its run folder.

`run_one` drives the trainer's own steps (`Trainer.train_step`) like `bench.run.run_job`, with what a study of
CPU-hours needs on top: the folder keeps the trainer's checkpoints (one at every evaluation) and `metrics.jsonl`, a
folder without `record.json` is resumed from its last checkpoint (`Trainer.resume()`; the metric lines after it are
dropped and repeated), and a folder with one is finished and skipped. Evaluation at 0, every `eval_every` steps and
the end by the registered measure (`eval`): `evaluation.exact` on the held-out prompts, or sampled Ave@k (the
trainer's own `evaluate`); at the end both, so each record carries the exact-vs-sampled gap. Per session (a cut-short
one too) it records the date, CPU model, torch threads and the 1-minute load average at start and end. A finished
run is recognised by `same_run`: the spec without this machine's paths and thread count, the data by digest.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import time
from itertools import accumulate
from pathlib import Path
from typing import Any


@dataclasses.dataclass(frozen=True)
class RunSpec:
    phase: str
    arm: str
    strategy: str
    lr: float
    seed: int
    folder: str
    model: str
    template: str
    train_path: str
    eval_path: str
    steps: int
    batch_size: int
    eval_every: int
    eval: str
    eval_samples: int
    check_samples: int
    max_new_tokens: int
    lora_r: int
    threads: int
    data: str = ""
    """sha256 of the training and held-out files' contents: the data identity paths on this machine cannot give."""
    verifier: str = "numeric"
    """What scores a sample (`tasks.verifiers`): the registration's `verifier` (a record without it ran `numeric`)."""
    generation_batch: int = 128
    """Rows a generation call decodes at once (the registration's `generation_batch`; records without it ran 128)."""
    micro_batch: int = 32
    """Rows a learner micro-batch holds (the registration's `micro_batch`; records without it ran 32)."""

    @property
    def key(self) -> str:
        return f"{self.phase}/{self.arm}/lr{self.lr:g}/seed{self.seed}"


MACHINE_FIELDS = ("folder", "model", "train_path", "eval_path", "threads")
"""RunSpec fields that name this machine's paths or its thread count: not part of what a run is (`same_run`)."""


def same_run(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Do two RunSpec dicts describe the same run? Every field but `MACHINE_FIELDS` must agree (the data by digest),
    so a finished run is recognised on another machine, from another cache folder or at another thread count."""
    keys = (set(a) | set(b)) - set(MACHINE_FIELDS)
    defaults = {f.name: f.default for f in dataclasses.fields(RunSpec) if f.default is not dataclasses.MISSING}
    return all(a.get(k, defaults.get(k)) == b.get(k, defaults.get(k)) for k in keys)  # a field added since: default


def train_config(spec: RunSpec) -> Any:
    from reinforce_ada.sampling.configure import parse_arm
    from reinforce_ada.training.config import TrainConfig, apply_overrides

    cfg = apply_overrides(
        TrainConfig(),
        {
            "model": {"path": spec.model, "lora_r": spec.lora_r, "threads": spec.threads},
            "task": {
                "name": "file",
                "path": spec.train_path,
                "eval_path": spec.eval_path,
                "template": spec.template,
                "verifier": spec.verifier,
            },
            "generation": {"max_new_tokens": spec.max_new_tokens, "batch_size": spec.generation_batch},
            "optim": {"lr": spec.lr, "micro_batch_size": spec.micro_batch},
            "run": {
                "steps": spec.steps,
                "batch_size": spec.batch_size,
                "seed": spec.seed,
                "eval_every": 0,
                "eval_samples": spec.eval_samples if spec.eval == "sampled" else spec.check_samples,
                "save_every": spec.eval_every,
                "keep_checkpoints": 1,
                "progress": False,
                "run_dir": spec.folder,
            },
        },
        f"llm_convergence run {spec.key}",
    )
    return dataclasses.replace(cfg, strategy=parse_arm(spec.strategy))


def run_one(spec: RunSpec) -> dict[str, Any]:
    """Train (or resume, or skip) one run; returns its record (also written to `<folder>/record.json`)."""
    from reinforce_ada.bench.run import SERIES, eval_steps, load_average
    from reinforce_ada.evaluation.exact import exact_pass_rates, summarize_exact
    from reinforce_ada.training.run_dir import write_file
    from reinforce_ada.training.tracking import read_metrics
    from reinforce_ada.training.trainer import Trainer
    from reinforce_ada.training.warm_start import machine

    folder = Path(spec.folder)
    done = folder / "record.json"
    if done.exists():
        rec = json.loads(done.read_text())
        if same_run(rec.get("spec", {}), dataclasses.asdict(spec)):
            return {**rec, "skipped": True}
        raise SystemExit(f"{folder} holds a finished run of another spec; remove the folder to run it again")
    session: dict[str, Any] = {"date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")}
    session["load_start"], t0 = load_average(), time.perf_counter()
    sessions = folder / "sessions.json"
    before = json.loads(sessions.read_text()) if sessions.exists() else []

    def note_session(**state: Any) -> None:
        """This session beside the earlier ones, rewritten at each checkpoint and when cut short: a process killed
        outright (SIGKILL at a session's end, no exception) keeps its machine, load and date up to its last
        checkpoint -- the study's first sessions lost theirs that way."""
        session.update(load_end=load_average(), wall_s=round(time.perf_counter() - t0, 1), **state)
        write_file(sessions, json.dumps([*before, session]) + "\n")

    tr = Trainer(train_config(spec), tensorboard=False)
    session.update(cpu=machine(), threads=spec.threads)  # after the trainer set torch's threads: `cpu` names them
    try:
        session["resumed_from"] = tr.step if tr.resume() else None
        at = set(eval_steps(spec.steps, spec.eval_every))

        def evaluate(m: dict[str, Any]) -> None:
            """The registered measure at every evaluation; with eval = "exact", sampled accuracy beside it at the
            start and the end (the gap); with eval = "sampled", no exact pass at all."""
            t0, ends = time.perf_counter(), tr.step in (0, spec.steps)
            if spec.eval == "exact":  # not run with "sampled": it read 0.001 for a model that answers in words
                # (3 minutes a run for nothing; found in review before the study ran)
                rates = exact_pass_rates(
                    tr.model, tr.tokenizer, tr.eval_prompts, max_new_tokens=spec.max_new_tokens, batch_size=64
                )  # one padded batch of 400 SmolLM2 prompts took 0.58 s a prompt, one of 40 0.17 s (loaded CPU)
                m["exact"] = summarize_exact(tr.eval_prompts, rates)
                if tr.step == 0:
                    m["start_rates"] = [round(float(x), 6) for x in rates]
                m["exact_s"] = time.perf_counter() - t0
            if spec.eval == "sampled" or ends:
                t1 = time.perf_counter()
                m["sampled"] = {k: v for k, v in tr.evaluate().items() if k.startswith("eval_accuracy")}
                m["sampled_s"] = time.perf_counter() - t1
            m["acc"] = m[spec.eval]["eval_accuracy"]
            m["eval_s"] = time.perf_counter() - t0

        if tr.step == 0:
            m0: dict[str, Any] = {"step": 0}
            evaluate(m0)
            tr.tracker.log(m0)
        while tr.step < spec.steps:
            cpu0 = time.process_time()  # this process's CPU seconds: with 1 torch thread, a step's cost that the
            m = tr.train_step()  # machine's load does not stretch (wall-clock `time_step_s` is kept beside it)
            m["process_s"] = time.process_time() - cpu0
            if tr.step in at:
                evaluate(m)
            tr.tracker.log(m)
            if tr.step in at:
                tr.save()
                note_session(cut_short=True, last_checkpoint=tr.step)  # until the run's record says otherwise
    except BaseException:  # cut short: keep this session's machine and load beside the checkpoints
        note_session(cut_short=True)
        raise
    finally:
        tr.close()
    rows = {r["step"]: r for r in read_metrics(folder)}
    steps = [rows[s] for s in range(1, spec.steps + 1)]
    evals = [rows[s] for s in sorted(rows) if "acc" in rows[s]]
    tokens = [0, *accumulate(r["tokens_generated"] for r in steps)]
    samples = [0, *accumulate(r["samples_generated"] for r in steps)]
    rec: dict[str, Any] = {"key": spec.key, "arm": spec.arm, "phase": spec.phase, "lr": spec.lr, "seed": spec.seed}
    rec.update(steps=spec.steps, eval_step=[r["step"] for r in evals], accuracy=[r["acc"] for r in evals])
    rec["eval_tokens"] = [tokens[s] for s in rec["eval_step"]]
    rec["eval_samples"] = [samples[s] for s in rec["eval_step"]]
    rec["per_level"] = {
        k[len("eval_accuracy_") :]: [r[spec.eval][k] for r in evals]
        for k in evals[0][spec.eval]
        if k.startswith("eval_accuracy_L")
    }
    rec["exact_accuracy"] = [r["exact"]["eval_accuracy"] if "exact" in r else None for r in evals]
    for k, src in {**SERIES, "process_s": "process_s"}.items():
        rec[k] = [float(r[src]) if isinstance(r.get(src), int | float) else None for r in steps]
    first, last = evals[0], evals[-1]
    rec["sampled_check"] = (
        None
        if "exact" not in last
        else {
            "exact": last["exact"]["eval_accuracy"],
            "sampled": last["sampled"]["eval_accuracy"],
            "samples": tr.cfg.run.eval_samples,
            "prompts": len(tr.eval_prompts),
            "exact_per_level": {k: v for k, v in last["exact"].items() if "_L" in k},
            "sampled_per_level": {k: v for k, v in last["sampled"].items() if "_L" in k},
        }
    )
    rec["start"] = {"exact": first.get("exact"), "sampled": first["sampled"], "rates": first.get("start_rates")}
    rec["eval_seconds"] = {
        k: [round(r[k], 2) if k in r else None for r in evals] for k in ("eval_s", "exact_s", "sampled_s")
    }
    session.pop("cut_short", None)
    session.update(load_end=load_average(), wall_s=round(time.perf_counter() - t0, 1))
    rec["sessions"] = [*before, session]
    rec["spec"] = dataclasses.asdict(spec)
    write_file(done, json.dumps(rec) + "\n")
    return rec
