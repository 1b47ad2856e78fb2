"""The RL loop. One step reads: strategy -> engine -> verifier -> advantages -> loss -> AdamW -> log -> checkpoint.

1) The sampling strategy runs against the rollout engine and the task verifier scores each sample: through the
   streaming scheduler (`collect_streaming`, no round barrier) for seq and est by default, else in rounds
   (`collect`). The engine is `engines.build_engine(generation.engine, ...)` (hf: `SlotEngine` for Llama-family
   models; vLLM), in this process, or a pool of Ray rollout workers each building it (`[rollout] workers > 0`,
   `training.rollout`). The trainer relies on the `engines.protocol.RolloutEngine` contract and its declared
   capabilities only; `sync_weights` after every update, so no engine samples from stale weights.
2) Each kept sample becomes a training row: prompt ids, completion ids, the sampler's log-probs, its advantage and
   its prompt's weight. The PPO "old" policy is the sampler's log-probs (`optim.old_logprobs="sampler"`, exact when
   sampler and learner compute the same numbers: fp32, our engines) or the learner's, recomputed in one no-grad
   forward before the update (`"recompute"`, the default with bf16 or vLLM; `learner.old_logprobs`), with an
   importance weight sampler -> learner on each token (`optim.is_correction`). The mismatch is reported every step
   (`mismatch_logp_abs_mean`, `mismatch_logp_abs_max`, `is_affected_token_share`). With `replay.enabled`, an
   all-wrong group first gets the prompt's stored earlier correct answer in place of one wrong sample, its tokens
   weighted by the truncated ratio to their behaviour log-probs (`training.replay`).
3) The loss is `losses.policy_loss` (token-level clipped ratio, asymmetric clip, dual-clip), accumulated over
   micro-batches so that the aggregate equals the full-batch one (each micro-batch is scaled by its share of the
   batch's tokens, or sequences for the seq-mean aggregations): `learner.accumulate`.
4) AdamW with linear warm-up (a function of the step and the run's warm-up length, fixed at its start and kept in
   its checkpoints; `TrainConfig.warmup_steps`, at most a fifth of the run), grad clip, fp32 master weights
   (optional bf16 autocast). A non-finite loss or gradient skips the update and is reported (`skipped_update`); a
   step that leaves non-finite weights or moves them too far is rolled back (`rolled_back_update`,
   `training.guard`), and `optim.max_rollbacks` of them in a row stop the run.
The run folder's rules (another run's config refused, steps only after `resume()`, no symlinks, one trainer at a time)
are `training.run_dir`'s, checked before the model is loaded; prompts too long for the model's context are left out
at start (`training.context`); a verifier failing on more than `run.max_verifier_error_share` of a step's samples
stops the run after a checkpoint.
Everything random is seeded and checkpointed (`state_dict`), so a killed run resumed from its last good checkpoint
(`resume()`, `training.resume`) repeats the uninterrupted run's later steps exactly (CPU).
"""

from __future__ import annotations

import contextlib
import dataclasses
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from reinforce_ada import tasks
from reinforce_ada.engines import RolloutEngine, build_engine
from reinforce_ada.engines.config import engine_spec
from reinforce_ada.evaluation.metrics import evaluate
from reinforce_ada.models.forward import sequence_logprobs
from reinforce_ada.models.load import load_policy
from reinforce_ada.sampling.ledger import StepBatch
from reinforce_ada.sampling.memory import coverage_note
from reinforce_ada.sampling.order import PromptOrder
from reinforce_ada.sampling.rounds import collect
from reinforce_ada.sampling.strategies import build_strategy
from reinforce_ada.sampling.streaming import collect_streaming
from reinforce_ada.training import checkpoint, learner, resume
from reinforce_ada.training import run_dir as run_folder
from reinforce_ada.training.config import TrainConfig, to_dict, to_toml
from reinforce_ada.training.context import embedded_fits, fit_batch, fit_splits
from reinforce_ada.training.drift import Drift
from reinforce_ada.training.dropout import disable_dropout
from reinforce_ada.training.experience import replay_buffer, reuse
from reinforce_ada.training.gate import Folder
from reinforce_ada.training.guard import StepGuard, VerifierFailing, verifier_failing
from reinforce_ada.training.interrupt import Interrupted, StopAtStepBoundary
from reinforce_ada.training.oracle import oracle_for
from reinforce_ada.training.paths import absolute_paths
from reinforce_ada.training.replay import mark
from reinforce_ada.training.rollout import guarded_step, rollout_pool
from reinforce_ada.training.rows import Row, batch_rows
from reinforce_ada.training.samples_log import SampleLog
from reinforce_ada.training.tracking import Tracker, postfix, progress_bar
from reinforce_ada.training.warm_start import resolve_model_path, warm_start_info

METRICS: dict[str, str] = {
    "step": "The learner's step the line follows (0: the evaluation before training).",
    "lr": "Learning rate of the step's update (linear warm-up, then optim.lr).",
    "loss": "Mean over the step's applied optimizer steps of the loss (`losses.policy_loss`; 0.0 when no row had "
    "a non-zero advantage).",
    "entropy": "Mean token entropy of the policy on the trained completions (nan when no update was applied).",
    "grad_norm": "Mean gradient norm before clipping at optim.grad_clip over the applied optimizer steps.",
    "clip_frac": "Mean share of trained tokens whose PPO ratio clip was active over the applied optimizer steps.",
    "skipped_update": "Optimizer steps skipped this step (a non-finite loss or gradient, or rolled back).",
    "update_ratio": "Only when an update was applied: how far the last one moved the trainable weights, "
    "norm(change) / norm(weights) (`training.guard`).",
    "rolled_back_update": "Only when the guard undid an update: optimizer steps rolled back this step (non-finite "
    "weights, or a move beyond optim.max_update_ratio).",
    "time_train_s": "Wall seconds of the update: rows, old log-probs, optimizer steps and the engine's weight sync.",
    "time_step_s": "Wall seconds of the whole step, probes left out (`Trainer.probes`).",
    "warm_start_pass_rate_L{level}": "Only at step 0 of a run from a warm-start folder: the pass rate its SFT "
    "recorded on held-out prompts of that level.",
}
"""The keys `Trainer` itself writes to metrics.jsonl (docs/metrics.md); the ledger's, the learner's drift, replay,
evaluation and the rest are declared beside their own code."""


class Trainer:
    """The library's own RL trainer: one `TrainConfig` in, a run folder out (`examples/train_own_data.py`).

    `Trainer(cfg)` opens `cfg.run.run_dir` (refused if another run holds it) and loads the model, task and engine;
    `fit()` trains `run.steps` steps and returns the last metrics; `resume()` continues a folder from its newest good
    checkpoint; `train_step()` is one step: the strategy collects groups through the engine, the verifier scores
    them, the learner updates on their advantages, the engine gets the new weights; `evaluate()` is held-out
    accuracy; `close()` releases the folder (`fit()` does it on return). `tensorboard=False` leaves TensorBoard out
    of `run.report_to` (the JSONL logs stay). `lock`: the folder's lock when the caller already opened it with
    `run_dir.open_run` (the CLI does, before torch is imported), so its checks run once.
    """

    def __init__(self, cfg: TrainConfig, *, tensorboard: bool = True, lock: run_folder.RunLock | None = None):
        cfg = absolute_paths(cfg)  # config.toml names files absolutely: the folder resumes from any directory
        self.cfg = cfg
        self.run_dir = Path(cfg.run.run_dir)
        if lock is not None and lock.path.parent.resolve() != self.run_dir.resolve():
            raise ValueError(f"the lock given is {lock.path}'s, not run.run_dir {self.run_dir}'s")
        self.lock = lock or run_folder.open_run_dir(cfg)  # the folder's promises (training.run_dir), checked once
        self.folder = Folder(self.run_dir)  # every write of the run passes this gate (training.gate)
        self._may_train = not run_folder.holds_steps(self.run_dir)  # a folder holding steps trains after resume() only
        try:
            self._build(cfg, tensorboard)
        except BaseException:
            if hasattr(self, "tracker"):
                self.tracker.close()
            self.lock.release()  # a trainer that could not be built holds no folder
            raise

    def _build(self, cfg: TrainConfig, tensorboard: bool) -> None:
        # run.report_to parsed here, once: an unknown tracker or a missing package fails before the model loads
        self.tracker = Tracker(self.folder, tensorboard=tensorboard, report_to=cfg.run.report_to)
        self.strategy = build_strategy(cfg.strategy.replace(seed=cfg.run.seed))  # its prior file read before, too
        torch.set_num_threads(cfg.model.threads)
        torch.manual_seed(cfg.run.seed)
        self.model_path = resolve_model_path(cfg.model, cfg.task, progress=cfg.run.progress)
        self.model, self.tokenizer = load_policy(self.model_path, cfg.model)
        disable_dropout(self.model)  # the engines sample without dropout: the learner must compute the same policy
        self.train_prompts, self.eval_prompts, self.verifier = tasks.build(cfg.task, self.tokenizer)
        if cfg.model.path is None:  # the embedded model reads only its own characters (training.context, 2)
            embedded_fits(self.train_prompts + self.eval_prompts, cfg.task.path or f"task {cfg.task.name!r}")
        self.train_prompts, self.eval_prompts, self.too_long = fit_splits(  # too long for the context: left out
            self.train_prompts, self.eval_prompts, self.tokenizer, self.model, cfg.generation.max_new_tokens
        )
        self.cfg = cfg = fit_batch(cfg, len(self.train_prompts))  # no larger than the pool: what runs is recorded
        self.order = PromptOrder(self.train_prompts, cfg.run.seed)
        note = coverage_note(self.strategy.memory.prior_rates, self.train_prompts, cfg.strategy.options.prior_file)
        if note:
            print(note, file=sys.stderr)
        self.oracle = oracle_for(cfg, self.model, self.tokenizer, self.train_prompts)  # estimator=oracle: exact rates
        self.strategy.attach(oracle=self.oracle, scorer=self.score)  # forgetting="drift": the learner scores
        self.replay = replay_buffer(cfg.replay, cfg.strategy.options.threshold)  # None unless replay.enabled
        self.spec = engine_spec(cfg.generation, seed=cfg.run.seed, streaming=cfg.streaming, bf16=cfg.model.bf16)
        if cfg.rollout.workers > 0:  # Ray rollout workers, each building `rollout.engine` (docs/ray.md)
            self.engine: RolloutEngine = rollout_pool(cfg, self.model, self.tokenizer, self.model_path)
        else:
            self.engine = build_engine(
                cfg.engine, self.spec, model=self.model, tokenizer=self.tokenizer, model_path=str(self.model_path)
            )
        self.params = [p for p in self.model.parameters() if p.requires_grad]
        o = cfg.optim
        self.opt = torch.optim.AdamW(self.params, lr=o.lr, weight_decay=o.weight_decay)
        self.guard = StepGuard(self.opt, self.params, o)
        self.rng = np.random.default_rng(cfg.run.seed + 7)  # minibatch shuffling
        self.ref = None
        if o.kl_coef > 0:
            self.ref = load_policy(self.model_path, dataclasses.replace(cfg.model, lora_r=0))[0].eval()
        self.step = 0
        self.warmup = cfg.warmup_steps  # fixed when the run starts: a resumed run keeps its own (`training.resume`)
        self.samples = SampleLog(self.folder, cfg)  # samples.jsonl, clipped share, the all-zero-reward warning
        if cfg.warmup_steps < o.warmup_steps and self._may_train:  # a resumed run keeps its own (resume says so)
            print(
                f"note: lr warm-up {cfg.warmup_steps} steps (optim.warmup_steps capped at a fifth of run.steps)",
                file=sys.stderr,
            )
        self._prompt_ids: dict[str, list[int]] = {}
        self.probes: list[Callable[[Trainer, StepBatch], dict[str, Any]]] = []
        """Diagnostics run on each step's batch before the update (a benchmark's exact pass rates, say); their
        metrics join the step's, their time is left out of `time_step_s`."""
        self.folder.write("config.toml", to_toml(cfg))  # what runs, as the trackers log it
        self.tracker.config = to_dict(cfg)

    # -- one step -----------------------------------------------------------------------------------------------
    def train_step(self) -> dict[str, Any]:
        t0 = time.perf_counter()
        batch_size = self.cfg.run.batch_size
        g = self.cfg.generation
        prompts = self.order.take(batch_size)
        common = dict(
            verifier=self.verifier,
            more_prompts=lambda k: self.order.take(k, exclude=self.strategy.prompts),
        )  # the verifier from tasks.build is already bounded in time (task.verifier_timeout_s)
        if self.cfg.streaming:
            batch = collect_streaming(
                self.strategy, self.engine, prompts, in_flight=g.in_flight, prefetch=g.prefetch, **common
            )
        else:
            batch = collect(self.strategy, self.engine, prompts, **common)
        replayed, old = reuse(self.replay, batch, self.strategy, self.step)  # [replay]: answers or samples
        if self.engine.capabilities.step_metrics:  # Ray rollout workers: per-worker samples and busy time, restarts
            batch.ledger.extra.update(self.engine.step_metrics())
        probe_s = time.perf_counter()
        for probe in self.probes:  # diagnostics of the batch under the policy that drew it; not part of the step
            batch.ledger.extra.update(probe(self, batch))
        probe_s = time.perf_counter() - probe_s
        t1 = time.perf_counter()
        rows = mark(self.rows(batch), replayed)
        if old is not None:  # earlier steps' groups, trained again (training.experience)
            rows += mark(self.rows(old), range(sum(len(g.samples) for g in old.groups)))
        stats = self.update(rows)
        # every engine hears of new weights: vLLM and Ray workers copy them, local engines drop their prompt KV cache
        # (an in-place or fused optimizer step moves no version counter the engine could watch)
        self.sync_weights()
        self.step += 1
        m = {"step": self.step, **batch.ledger.as_metrics(), **stats, **self.samples.record(self.step, batch)}
        m["time_train_s"] = time.perf_counter() - t1
        m["time_step_s"] = time.perf_counter() - t0 - probe_s
        return m

    def score(self, prompts: list[Any], completions: list[list[int]]) -> list[list[float]]:
        """Per-token log-probs of `completions` under the current policy, at the sampling temperature (no grad)."""
        ids = [self._prompt_ids.setdefault(p.id, self.tokenizer(p.text, add_special_tokens=False)["input_ids"])
               for p in prompts]  # fmt: skip
        out: list[list[float]] = []
        mb = self.cfg.optim.micro_batch_size
        with torch.no_grad():
            for i in range(0, len(ids), mb):
                logp, mask, _ = sequence_logprobs(
                    self.model, ids[i : i + mb], completions[i : i + mb], self.engine.pad_id,
                    temperature=self.cfg.generation.temperature,
                )  # fmt: skip
                out += [row[m].tolist() for row, m in zip(logp.cpu(), mask.cpu(), strict=True)]
        return out

    def sync_weights(self) -> None:
        """New weights: the engine copies them and the oracle's cached rates (estimator=oracle) are stale."""
        self.engine.sync_weights(self.model)
        if self.oracle is not None:
            self.oracle.invalidate()

    def rows(self, batch: StepBatch) -> list[Row]:
        return batch_rows(batch, self.tokenizer, self._prompt_ids)

    def update(self, rows: list[Row]) -> dict[str, Any]:
        o = self.cfg.optim
        lr = o.lr * min(1.0, (self.step + 1) / (self.warmup + 1))  # linear warm-up, then constant
        for group in self.opt.param_groups:
            group["lr"] = lr
        out: dict[str, Any] = {"lr": lr, "skipped_update": 0}
        losses, entropies, norms, clip = [], [], [], []
        live = [r for r in rows if r.adv != 0.0]
        if not live:  # nothing to learn from: skip the optimizer
            return {**out, "loss": 0.0, "entropy": float("nan"), "grad_norm": 0.0, "clip_frac": 0.0}
        drift = Drift(self.cfg.is_correction, o.is_cap)
        if self.cfg.old_logprobs == "recompute":
            self.recompute_old([r for r in rows if not r.replayed], drift)
        if replayed := [r for r in rows if r.replayed]:  # their PPO old policy: the learner's now (training.replay)
            self.recompute_old(replayed, Drift())
        for epoch in range(o.epochs):
            order = self.rng.permutation(len(rows)) if o.epochs * o.minibatches > 1 else np.arange(len(rows))
            for k, mb_idx in enumerate(np.array_split(order, o.minibatches)):
                mb = [rows[i] for i in mb_idx]
                # with the sampler's log-probs as the old policy, the first pass (before any optimizer step) measures
                # the sampler/learner mismatch for free
                measure = drift if self.cfg.old_logprobs == "sampler" and epoch == k == 0 else None
                loss, ent, cf, ok = self.accumulate(mb, drift=measure)
                norm = torch.nn.utils.clip_grad_norm_(self.params, o.grad_clip)
                if not ok or not torch.isfinite(norm):
                    self.opt.zero_grad(set_to_none=True)
                    out["skipped_update"] += 1
                    continue
                if not self.guard.step():  # rolled back: the step would have wrecked the weights (training.guard)
                    self.opt.zero_grad(set_to_none=True)
                    out["skipped_update"] += 1
                    out["rolled_back_update"] = out.get("rolled_back_update", 0) + 1
                    continue
                self.opt.zero_grad(set_to_none=True)
                out["update_ratio"] = self.guard.last_ratio
                losses.append(loss), entropies.append(ent), norms.append(float(norm)), clip.append(cf)
        mean = lambda x: float(np.mean(x)) if x else float("nan")  # noqa: E731
        return {
            **out,
            "loss": mean(losses),
            "entropy": mean(entropies),
            "grad_norm": mean(norms),
            "clip_frac": mean(clip),
            **drift.metrics(),
        }

    def _autocast(self) -> Any:
        device = next(self.model.parameters()).device
        return torch.autocast(device.type, dtype=torch.bfloat16) if self.cfg.model.bf16 else contextlib.nullcontext()

    def recompute_old(self, rows: list[Row], drift: Drift) -> None:
        """The learner's log-probs of every row before the update (one no-grad forward, as verl): the PPO old policy."""
        o, temp = self.cfg.optim, self.cfg.generation.temperature
        learner.old_logprobs(self.model, rows, drift, o.micro_batch_size, self.engine.pad_id, temp, self._autocast)

    def accumulate(self, mb: list[Row], drift: Drift | None = None) -> tuple[float, float, float, bool]:
        """Backward over micro-batches (`learner.accumulate`); returns (loss, entropy, clip fraction, all finite)."""
        return learner.accumulate(
            self.model,
            self.ref,
            mb,
            self.cfg,
            self.engine.pad_id,
            self._autocast,
            replay=self.replay is not None,
            drift=drift,
        )

    # -- evaluation, checkpoints, the loop -----------------------------------------------------------------------
    def evaluate(self) -> dict[str, Any]:
        seed = self.cfg.run.seed * 100_003 + self.step  # own seed: no drift
        # at generation.temperature, without top-k/top-p (as before the factory)
        spec = dataclasses.replace(self.spec, streaming=False, top_p=1.0, top_k=0, seed=seed)
        eng = build_engine("hf", spec, model=self.model, tokenizer=self.tokenizer)
        # a held-out pass can take minutes on a real model: a bar (that disappears when done) shows it is moving
        with progress_bar(self.cfg.run.progress, total=len(self.eval_prompts), desc="eval", leave=False) as bar:
            return evaluate(eng, self.eval_prompts, self.verifier, samples=self.cfg.run.eval_samples, progress=bar)

    def state_dict(self) -> dict[str, Any]:
        return {
            "step": self.step,
            "warmup_steps": self.warmup,
            "optimizer": self.opt.state_dict(),
            "strategy": self.strategy.state_dict(),
            "order": self.order.state_dict(),
            "engine": self.engine.state_dict(),
            "rng": self.rng.bit_generator.state,
            "torch_rng": torch.get_rng_state(),
            **({"replay": self.replay.state_dict()} if self.replay is not None else {}),
        }

    def save(self) -> Path:
        return checkpoint.save(
            self.folder, self.step, self.state_dict(), self.model, self.tokenizer, keep=self.cfg.run.keep_checkpoints
        )

    def resume(self) -> bool:
        """Load the newest good checkpoint of the run folder; returns whether one was loaded.

        A bad checkpoint (checksums, unreadable, not this model, non-finite weights, a state not of its own step) is
        skipped with a warning for the one before it; none good is a CheckpointError naming why each failed. Metrics
        of steps after the loaded checkpoint are dropped (resuming repeats them). The loading is `training.resume`'s."""
        self._may_train = True
        return resume.resume(self)  # training.resume

    def fit(self) -> dict[str, Any]:
        """Train to `run.steps`, logging and checkpointing; the run folder's lock is released when it returns.

        Raises ConfigError when the folder already holds steps and `resume()` was not called (never mix two runs),
        TrainingDiverged after `optim.max_rollbacks` wrecked updates in a row, VerifierFailing when the verifier
        errs on more than `run.max_verifier_error_share` of a step's samples (after saving a checkpoint)."""
        try:
            if not self._may_train:
                run_folder.refuse_fresh_start(self.run_dir)
            return self._fit()
        finally:
            self.close()

    def close(self) -> None:
        """Close the metric sinks and release the run folder's lock."""
        self.tracker.close()
        self.lock.release()

    def _fit(self) -> dict[str, Any]:
        r = self.cfg.run
        last: dict[str, Any] = {}
        if self.step == 0:
            last = {"step": 0, **self.evaluate(), **self.warm_start_metrics(), **self.too_long}
            self.tracker.log(last)
        bar = progress_bar(r.progress, total=r.steps, initial=self.step)
        with StopAtStepBoundary() as stop:
            while self.step < r.steps:
                m = guarded_step(self) if self.cfg.rollout.workers else self.train_step()
                if (r.eval_every and self.step % r.eval_every == 0) or self.step == r.steps:
                    m.update(self.evaluate())
                self.tracker.log(m)
                saved = self.step % r.save_every == 0 or self.step == r.steps
                if saved:
                    self.save()
                bar.update(1)
                bar.set_postfix(postfix(m))
                last = m
                failing = verifier_failing(m, self.cfg)
                if failing or (stop.requested and self.step < r.steps):
                    if not saved:
                        self.save()
                    bar.close()
                    if failing:
                        raise VerifierFailing(failing + f"; a checkpoint of step {self.step} is in {self.run_dir}")
                    raise Interrupted(self.step)
        bar.close()
        return last

    def warm_start_metrics(self) -> dict[str, Any]:
        info = warm_start_info(self.model_path)
        return {f"warm_start_pass_rate_L{k}": v for k, v in info.get("pass_rates", {}).items()}
