"""Reinforce-Ada inside TRL: `AdaGRPOTrainer`, a drop-in `GRPOTrainer` whose sampling is decided by our strategy.

One generation batch, per process:
1) TRL's dataloader gives each process whole prompt groups (its RepeatSampler repeats each prompt num_generations
   times); we keep one row per prompt, as our `Prompt`s (id: a hash of the row's prompt, stable across steps).
2) `sampling.rounds.collect` runs the strategy (any in the registry) over `TRLEngine` (`trl_engine`), whose rounds
   call TRL's own generation path and reward functions, agreed across processes; `drain()` keeps a finished process
   in the rounds until every process is done. Refills and admission candidates come from dataset rows whose prompts
   are not already in the step (`_ada_more`). After the step every process's visits are replayed from the pre-step
   memory in one order on every process (`trl_memory`), so the prompt memory is the same on all processes.
3) The kept samples go through TRL's own `_generate_and_score_completions` as a replayed rollout (TRL's public
   `rollout_func` hook, set for that one call), so padding, old/reference log-probs, vLLM importance ratios, the loss
   inputs and TRL's logs are TRL's. `_calculate_rewards` returns the rewards already computed in the rounds, and the
   advantages TRL computes are replaced by ours: `sampling.advantages.compute_advantages` on the strategy's groups
   (whole-pool baseline for seq/est, group mean and std for uniform/dynamic by default) times the per-prompt weight
   (Est's residual), exactly as our trainer multiplies them in its loss.
4) Each process's trained rows are padded to one count (a multiple of lcm(num_generations, steps_per_generation)),
   TRL's gathers need equal shapes: padding rows carry a zero loss mask (`env_mask`), NaN rewards and zero advantage.
   They leave token-normalised losses (`dapo`, the default, `bnpo`, `cispo`) exact; sequence-mean losses (`grpo`,
   `dr_grpo`, `sapo`, `luspo`) count them as empty sequences. Uniform never pads; seq (n rows a prompt) pads only
   with `unresolved="drop"` (processes then keep different numbers of prompts, or one keeps none); Est pads when its
   budget is uneven, dynamic when processes keep different numbers of groups.
5) The ledger is reduced over processes and logged under `ada/`; a step in which more than
   `max_verifier_error_share` of the samples had no usable reward stops the run (`trl_ledger.check_verifier_errors`).
   Strategy state is written into every checkpoint (`reinforce_ada/state_rank{r}.json`) and read back by
   `train(resume_from_checkpoint=...)`, refusing a damaged or foreign file (`trl_state`).
Departures: the std floor is TRL's 1e-4 (our trainer's is 1e-6), so uniform reproduces stock GRPOTrainer; TRL's
`reward`, `frac_reward_zero_std` and `completions/*` logs describe the trained rows, `ada/*` the whole step.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import trl
from accelerate.utils import gather, gather_object
from transformers import TrainerCallback
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR, get_last_checkpoint
from trl import GRPOTrainer

from reinforce_ada.errors import ConfigError
from reinforce_ada.integrations.trl_config import AdaGRPOConfig
from reinforce_ada.integrations.trl_data import check_columns, check_prompt, check_size
from reinforce_ada.integrations.trl_engine import TRLEngine
from reinforce_ada.integrations.trl_ledger import (  # noqa: F401  # RewardsFailedError: what a user catches
    RewardsFailedError,
    check_verifier_errors,
    log_ledger,
    reduce_ledger,
)
from reinforce_ada.integrations.trl_memory import VisitLog, share_visits
from reinforce_ada.integrations.trl_state import load_into, read_state, write_state
from reinforce_ada.sampling.advantages import batch_normalize
from reinforce_ada.sampling.ledger import step_advantages
from reinforce_ada.sampling.length import refuse_length_cap
from reinforce_ada.sampling.memory import refuse_drift, refuse_oracle
from reinforce_ada.sampling.order import PromptOrder
from reinforce_ada.sampling.rounds import collect
from reinforce_ada.sampling.strategies import build_strategy
from reinforce_ada.training.replay import refuse as refuse_replay
from reinforce_ada.types import Group, Prompt

TESTED_TRL = ">=1.16,<1.17"
TRL_STD_FLOOR = 1e-4
"""TRL's `(r - mean) / (std + 1e-4)`."""
HOOKED: dict[str, str] = {
    "_generate_and_score_completions": (
        "(self, inputs: list[dict[str, torch.Tensor | typing.Any]]) -> dict[str, torch.Tensor | typing.Any]"
    ),
    "_calculate_rewards": "(self, inputs, prompts, completions, completion_ids_list)",
    "_generate_single_turn": "(self, prompt_ids, images, multimodal_fields, num_generations, has_tool_images=False)",
    "_tokenize_prompts": "(self, prompts: list)",
    "_log_metric": "(self, name: str, value: float)",
}
"""TRL private methods we override or call, with their signatures in the tested TRL (trl 1.16.0)."""
USED_ATTRIBUTES = ("_metrics", "_logs", "_pending_extra_logs", "rollout_func", "reward_funcs", "reward_weights")


def check_trl(trainer_cls: type = GRPOTrainer) -> None:
    """Fail loudly, naming the method, when a hooked TRL method's signature differs from the tested one."""
    changed = {
        name: str(inspect.signature(getattr(trainer_cls, name)))
        for name in HOOKED
        if not hasattr(trainer_cls, name) or str(inspect.signature(getattr(trainer_cls, name))) != HOOKED[name]
    }
    if changed:
        lines = "; ".join(f"{n}{sig} (tested: {n}{HOOKED[n]})" for n, sig in changed.items())
        raise RuntimeError(
            f"trl {trl.__version__} changed GRPOTrainer methods AdaGRPOTrainer hooks: {lines}. "
            f"reinforce-ada is tested with trl{TESTED_TRL}: pip install 'trl{TESTED_TRL}'"
        )


def prompt_key(prompt: Any) -> str:
    """A stable id for a dataset prompt (text or messages): the prompt memory follows it across steps."""
    return hashlib.sha1(json.dumps(prompt, sort_keys=True, default=str).encode()).hexdigest()[:16]


@dataclass
class Replay:
    """One process's trained rows, in TRL's order, as the replayed rollout hands them to TRL."""

    examples: list[dict[str, Any]]
    prompt_ids: list[list[int]]
    completion_ids: list[list[int]]
    logprobs: list[list[float]] | None
    per_func: np.ndarray
    """(rows, reward functions); NaN rows are padding."""
    advantages: np.ndarray
    extra: dict[str, list[Any]]
    mask: list[list[int]] | None
    """Loss mask per row (0 for padding), or None when no process padded (stock TRL's outputs exactly)."""

    def rollout(self, prompts: list, trainer: Any) -> dict[str, Any]:
        out = {"prompt_ids": self.prompt_ids, "completion_ids": self.completion_ids, "logprobs": self.logprobs}
        return out if self.mask is None else {**out, "env_mask": self.mask}


class AdaStateCallback(TrainerCallback):
    """Writes the strategy's state into each TRL checkpoint (every process its own file)."""

    def __init__(self, trainer: AdaGRPOTrainer):
        self.trainer = trainer

    def on_save(self, args, state, control, **kwargs):
        self.trainer.save_ada_state(Path(args.output_dir) / f"{PREFIX_CHECKPOINT_DIR}-{state.global_step}")


class AdaGRPOTrainer(GRPOTrainer):
    """`GRPOTrainer` with reinforce-ada's sampling (module docstring). Same constructor and user contract; `args`
    must be an `AdaGRPOConfig`. Not supported: `rollout_func`, `tools`, `environment_factory`, image prompts."""

    def __init__(self, *args: Any, **kwargs: Any):
        config = kwargs.get("args", args[2] if len(args) > 2 else None)
        if not isinstance(config, AdaGRPOConfig):
            raise ConfigError(f"AdaGRPOTrainer needs args=AdaGRPOConfig(...), got {type(config).__name__}")
        refuse_oracle(config.estimator, "AdaGRPOTrainer")
        refuse_drift(config.forgetting, "AdaGRPOTrainer")
        refuse_length_cap(config.length_cap, "AdaGRPOTrainer")
        refuse_replay(config.replay, "AdaGRPOTrainer")  # no behaviour-log-prob store or IS hook in TRL's loss (yet)
        check_trl()
        check_columns(kwargs.get("train_dataset", args[3] if len(args) > 3 else None))
        super().__init__(*args, **kwargs)
        check_size(self.train_dataset, self.args.generation_batch_size // self.num_generations)
        for name in USED_ATTRIBUTES:
            if not hasattr(self, name):
                raise RuntimeError(f"trl {trl.__version__}: GRPOTrainer has no {name!r}; tested with trl{TESTED_TRL}")
        for name, value in (("rollout_func", self.rollout_func), ("tools", self.tools)):
            if value:
                raise ConfigError(f"{name} is not supported by AdaGRPOTrainer: the strategy decides what is sampled")
        if self.environment_factories is not None:
            raise ConfigError("environment_factory is not supported by AdaGRPOTrainer")
        rank = self.accelerator.process_index
        self.ada_config = config.strategy_config(seed=config.seed + rank)
        self.ada_strategy = build_strategy(self.ada_config)
        self.ada_engine = TRLEngine(self, chunk=config.per_device_train_batch_size * config.steps_per_generation)
        self.ada_order: PromptOrder | None = None
        """Where refills and admission candidates come from (built on first use: DAPO, MoPPS, GRESO, eviction)."""
        self.ada_history: list[dict[str, dict[str, Any]]] = []
        """Per generation batch: this process's ledger ("local") and the one reduced over processes ("total")."""
        self._ada_replay: Replay | None = None
        self.add_callback(AdaStateCallback(self))

    # -- TRL hooks -------------------------------------------------------------------------------------------------
    def _generate_and_score_completions(self, inputs: list[dict[str, Any]]) -> dict[str, Any]:
        if not self.model.training:  # evaluation stays stock TRL
            return super()._generate_and_score_completions(inputs)
        if any(k in inputs[0] for k in ("image", "images")):
            raise ConfigError("image prompts are not supported by AdaGRPOTrainer")
        replay, groups = self._ada_step(inputs)
        self._ada_replay, self.rollout_func = replay, replay.rollout
        try:
            out = super()._generate_and_score_completions(replay.examples)
        finally:
            self._ada_replay, self.rollout_func = None, None
        out["advantages"] = torch.tensor(replay.advantages, dtype=torch.float32, device=self.accelerator.device)
        self._ada_fix_trl_logs(replay, groups)
        return out

    def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
        if self._ada_replay is None:
            return super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)
        for column, values in self._ada_replay.extra.items():
            self._pending_extra_logs[column].extend(values)
        per_func = torch.tensor(self._ada_replay.per_func, dtype=torch.float32, device=self.accelerator.device)
        return gather(per_func)

    def train(self, resume_from_checkpoint: str | bool | None = None, *args: Any, **kwargs: Any):
        path = resume_from_checkpoint
        if path is True:
            path = get_last_checkpoint(self.args.output_dir)
        if path:
            self.load_ada_state(Path(path))
        return super().train(resume_from_checkpoint, *args, **kwargs)

    # -- one step of sampling ---------------------------------------------------------------------------------------
    def _ada_step(self, inputs: list[dict[str, Any]]) -> tuple[Replay, list[Group]]:
        rows = inputs[:: self.num_generations]
        prompts = self._ada_prompts(rows)
        engine, strategy = self.ada_engine, self.ada_strategy
        engine.start(prompts, rows)
        log = VisitLog(strategy.memory) if self.accelerator.num_processes > 1 else None
        try:
            batch = collect(strategy, engine, prompts, more_prompts=self._ada_more)
            engine.drain()
        except BaseException:
            if log is not None:
                log.close()
            raise
        c = self.ada_config
        advs, weights = batch.advantages, batch.weights
        if c.options.scale_std:  # the same advantages with TRL's std floor (only the floor differs)
            advs, weights = step_advantages(c.options, batch.groups, eps=TRL_STD_FLOOR)
            advs = batch_normalize(batch.groups, advs, c.options.batch_normalize)
        batch.ledger.verifier_errors += engine.errors
        if log is not None:  # every process's visits, in one order on every process (trl_memory)
            share_visits(log, gather_object)
        kept = [
            (engine.scored[id(s)], float(a * w))
            for g, adv_R, w in zip(batch.groups, advs, weights, strict=True)
            for s, a in zip(g.samples, adv_R, strict=True)
        ]
        local, total, target = reduce_ledger(self, batch, strategy, engine, len(kept))
        self.ada_history.append({"local": local, "total": total})
        check_verifier_errors(total, self.args.max_verifier_error_share, self.args.output_dir, self.state.global_step)
        log_ledger(self._metrics["train"], total)
        replay = self._ada_replay_rows(kept, target, padded_anywhere=total["padded_rows"] > 0)
        strategy.begin([])  # drop the step's pools: what outlives a step is the rng and the prompt memory
        return replay, batch.groups

    def _ada_prompts(self, rows: list[dict[str, Any]]) -> list[Prompt]:
        prompts, seen = [], set()
        for r in rows:
            check_prompt(r.get("prompt"), "a train_dataset row")  # an iterable dataset's rows are checked here
            key = prompt_key(r["prompt"])
            while key in seen:  # the same prompt twice in one batch: both are sampled, as in stock TRL
                key += "+"
            seen.add(key)
            prompts.append(Prompt(id=key, text=json.dumps(r["prompt"], default=str)))
        return prompts

    def _ada_more(self, k: int) -> list[Prompt]:
        """Up to k fresh dataset rows whose prompts are not already in the step, for DAPO refills, Pilot-Commit's
        deficit and admission candidates; fewer (or none: the protocol's "exhausted") only when the dataset has no
        other prompt. Each process draws its own, from a seeded epoch order that is checkpointed. An iterable
        dataset has none to give."""
        if not hasattr(self.train_dataset, "__getitem__"):
            warnings.warn(
                "the strategy asked for more prompts; an iterable train_dataset cannot give them", stacklevel=2
            )
            return []
        stubs = self._ada_prompt_order().take(k, exclude=self.ada_strategy.prompts)
        rows = [self.train_dataset[s.meta["row"]] for s in stubs]
        out = [Prompt(id=s.id, text=json.dumps(r["prompt"], default=str)) for s, r in zip(stubs, rows, strict=True)]
        self.ada_engine.add(out, rows)
        return out

    def _ada_prompt_order(self) -> PromptOrder:
        """The dataset's rows in seeded epochs, keyed by `prompt_key` so that `take` can skip the step's prompts
        (and a prompt the dataset holds twice is drawn once per step). Built on first use: one hash per row."""
        if self.ada_order is None:
            ds = self.train_dataset
            column = ds["prompt"] if hasattr(ds, "column_names") else (ds[i]["prompt"] for i in range(len(ds)))
            stubs = [Prompt(id=prompt_key(p), text="", meta={"row": i}) for i, p in enumerate(column)]
            self.ada_order = PromptOrder(stubs, seed=self.args.seed * 1000 + 17 + self.accelerator.process_index)
        return self.ada_order

    def _ada_replay_rows(self, kept: list, target: int, *, padded_anywhere: bool) -> Replay:
        e = self.ada_engine
        pad = target - len(kept)
        pad_pid = kept[0][0].sample.prompt_id if kept else e.first
        eos = self.eos_token_ids[0]
        samples = [sc.sample for sc, _ in kept]
        completion_ids = [s.token_ids for s in samples] + [[eos]] * pad
        n_funcs = len(self.reward_funcs)
        per_func = np.concatenate(
            [np.array([sc.per_func for sc, _ in kept]).reshape(-1, n_funcs)] + [np.full((pad, n_funcs), np.nan)]
        )
        columns = {c for sc, _ in kept for c in sc.extra}
        return Replay(
            examples=[e.rows[s.prompt_id] for s in samples] + [e.rows[pad_pid]] * pad,
            prompt_ids=[e.prompt_ids[s.prompt_id] for s in samples] + [e.prompt_ids[pad_pid]] * pad,
            completion_ids=completion_ids,
            logprobs=[s.logprobs for s in samples] + [[0.0]] * pad if self.use_vllm else None,
            per_func=per_func,
            advantages=np.array([a for _, a in kept] + [0.0] * pad),
            extra={c: [sc.extra.get(c) for sc, _ in kept] + [None] * pad for c in sorted(columns)},
            mask=[[1] * len(c) for c in completion_ids[: len(kept)]] + [[0]] * pad if padded_anywhere else None,
        )

    def _ada_fix_trl_logs(self, replay: Replay, groups: list[Group]) -> None:
        """TRL logged its own advantages (for the completions table) and its zero-std share over num_generations-
        sized blocks of rows; put ours instead where they can differ."""
        device = self.accelerator.device
        if self.log_completions:
            all_adv = gather(torch.tensor(replay.advantages, dtype=torch.float32, device=device))
            logged = self._logs["advantages"]
            for _ in range(min(len(logged), len(all_adv))):
                logged.pop()
            logged.extend(all_adv.tolist())
        blocks = replay.mask is None and all(len(g.samples) == self.num_generations for g in groups)
        if not blocks or self.accelerator.num_processes > 1:  # a gather: every process or none (blocks is local)
            zero_std = [float(np.std(g.rewards) == 0) for g in groups]
            counts = torch.tensor([sum(zero_std), len(zero_std)], dtype=torch.float64, device=device)
            total = gather(counts).view(-1, 2).sum(0)
            self._metrics["train"]["frac_reward_zero_std"][-1] = float(total[0] / total[1].clamp(min=1))

    # -- checkpoints ------------------------------------------------------------------------------------------------
    def ada_state(self) -> dict[str, Any]:
        return {
            "strategy": self.ada_strategy.state_dict(),
            "order": self.ada_order.state_dict() if self.ada_order is not None else None,
            "config": self.ada_config.to_dict(),
        }

    def save_ada_state(self, checkpoint: Path) -> None:
        write_state(checkpoint, self.accelerator.process_index, self.ada_state())

    def load_ada_state(self, checkpoint: Path) -> None:
        """Read this process's state from a TRL checkpoint; a damaged or foreign file is refused (`trl_state`)."""
        found = read_state(checkpoint, self.accelerator.process_index, self.ada_config)
        if found is not None:
            load_into(*found, self.ada_strategy, self._ada_prompt_order)
