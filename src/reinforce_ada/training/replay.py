"""Replay of earlier correct answers for hard prompts (AR3PO's response reuse, arXiv 2509.25808), off-policy corrected.

The rule (`[replay] enabled = true`, any strategy; our trainer only):
1) A per-prompt buffer, keyed by the stable `Prompt.id`, holds the most recent correct completion (reward >
   `strategy.threshold`) generated for that prompt: its token ids, the behaviour policy's log-prob of each token at
   generation time, its reward and the step it was generated at. One entry per prompt (a fresher correct answer
   overwrites it), so memory is bounded by the prompt pool. Only freshly generated samples are stored (from every
   sample of the step's pools, not just the trained ones); a replayed answer keeps its original step.
2) After the strategy has built the step's groups and before the learner sees them, every trained group with no
   correct sample (every reward <= threshold) whose prompt has an entry no older than `replay.max_age` steps gets
   that entry in place of ONE of its wrong samples (the last one): the group size is unchanged. The replaced sample's
   reward is swapped for the replayed one in the group's pool rewards too, so `global` and `corrected` baselines see
   the replay as one of the pool's draws. Advantages and weights are then recomputed exactly as `sampling.ledger.finish`
   does (`compute_advantages` with the strategy's estimator), so the group now carries signal.
3) Off-policy correction. A replayed row's PPO "old" policy is the learner's log-probs before the update (one no-grad
   forward over the replayed rows only), and its loss is importance-weighted against the stored behaviour log-probs
   pi_behaviour, by `replay.correction`:
   - `sequence` (the default): every token by w = min(prod_t pi_old(y_t | y_<t) / pi_behaviour(y_t | y_<t),
     `replay.clip`), the whole answer's ratio (`losses.importance_weights`, mode sequence_truncate). At the first
     optimizer step pi_theta = pi_old, so the gradient is A * w * grad log pi_theta(y): truncated importance sampling
     of the current policy's gradient from a behaviour sample (Yao et al.; IMPALA's rho-bar), unbiased up to the
     truncation. Why the default: it corrects the distribution of the whole answer. `test_replay.py` shows it on an
     exactly enumerable two-token toy: the sequence ratio's expected gradient points exactly along the current
     policy's (cosine 1.00), the per-token ratio's does not (cosine 0.91).
   - `token`: each token by its own min(pi_old(y_t | y_<t) / pi_behaviour(y_t | y_<t), clip) (mode token_truncate):
     lower variance on long answers, but the prefix y_<t each token is conditioned on is still drawn from the
     behaviour policy, so the expected gradient is not the current policy's (the toy's 0.91).
   What neither corrects: the stored answer is conditioned on having been correct. It is the behaviour policy's
   draw given reward > threshold, pi_behaviour(y | correct) = pi_behaviour(y) 1[correct] / P_behaviour(correct),
   not a draw from pi_behaviour; the ratio divides by pi_behaviour(y) only. So a replayed row estimates the current
   policy's gradient restricted to correct answers, scaled by 1 / P_behaviour(correct) (the prompt's pass rate when
   the answer was drawn, which the buffer does not know): a deliberately optimistic signal for a prompt whose
   group found none, not an unbiased estimate of the group's gradient. PPO's clip on pi_theta / pi_old still bounds
   later minibatches and epochs. On-policy rows are unchanged. Replayed rows are left out of the sampler/learner
   mismatch metrics (they are stale by design).
4) Accounting: a replayed sample was not generated this step, so it is not in `samples_generated` /
   `tokens_generated` (the engine's counts); it is trained, so it is in `samples_trained` / `tokens_trained`. The
   ledger's trained-side fields are refreshed; metrics `replay_prompts`, `replay_share` (replayed / trained samples),
   `replay_buffer_size` and `replay_age_mean` (steps since the replayed answers were generated; nan when none).
5) The buffer is part of the trainer's checkpoint state (`state["replay"]`), so a resumed run replays identically.

Where this departs from AR3PO. What could be verified here (the paper's abstract and third-party summaries; neither
the paper's full text nor its code was reachable): AR3PO reuses previously generated correct responses from a
replay buffer when a prompt's current rollouts yield no correct one, to restore the group's advantage, and pairs this
with adaptive rollout (more rollouts, in stages, for prompts not yet solved) -- the latter is not part of this
module; compose `replay` with `seq:exit=positive` for something close. NOT verified, so chosen here and stated:
replace rather than append (keeps the learner's batch, its cost and `n` fixed, the GRPO group statistics over n
samples); the last wrong sample is the one replaced (deterministic, no extra RNG state); `replay.max_age` (off by
default: no age limit was mentioned in what we could read); and the off-policy correction (a truncated IS weight
against the stored behaviour log-probs, of the whole answer by default; AR3PO's exact ratio, clip and any weighting
of the reused response are unknown to us). The prompt's PromptOrder still decides when it is revisited, so with a
pool larger than a few batches a replay fires only from the second epoch on.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import torch

from reinforce_ada.errors import ConfigError
from reinforce_ada.sampling.advantages import batch_normalize, zero_advantage
from reinforce_ada.sampling.ledger import StepBatch, completion_tokens, step_advantages
from reinforce_ada.training.losses import importance_weights
from reinforce_ada.types import Group, Sample


def refuse(enabled: Any, where: str, option: str = "replay") -> None:
    """An integration without the replay hooks refuses replay at start, naming its own option."""
    if enabled:
        raise ConfigError(
            f"{option}=true is not supported by {where}: replaying stored answers needs reinforce_ada's own trainer "
            "(`reinforce-ada train` / `compare`), which keeps the behaviour log-probs and applies the truncated "
            f"importance weight; set {option}=false"
        )


@dataclass
class Entry:
    """One stored correct completion of a prompt."""

    token_ids: list[int]
    logprobs: list[float]
    """The behaviour policy's log-prob of each token, as the engine returned it at generation time."""
    step: int
    """The trainer step (updates applied so far) at which it was generated."""
    reward: float
    text: str = ""
    finish_reason: str = ""


def _storable(s: Sample, threshold: float) -> bool:
    return (
        s.reward is not None
        and float(s.reward) > threshold
        and len(s.token_ids) > 0
        and len(s.logprobs) == len(s.token_ids)
        and all(math.isfinite(x) for x in s.logprobs)
    )


class ReplayBuffer:
    """The per-prompt store of the latest correct answer (module docstring, 1-2)."""

    def __init__(self, threshold: float, max_age: int | None = None) -> None:
        self.threshold, self.max_age = float(threshold), max_age
        self.entries: dict[str, Entry] = {}

    @classmethod
    def for_config(cls, replay: Any, threshold: float) -> ReplayBuffer | None:
        """The buffer a `ReplayConfig` asks for (checked when it was built), or None when off; `threshold` is the
        strategy's (what counts as correct)."""
        return cls(threshold, replay.max_age) if replay.enabled else None

    def usable(self, prompt_id: str, step: int) -> Entry | None:
        e = self.entries.get(prompt_id)
        if e is None or e.step >= step or (self.max_age is not None and step - e.step > self.max_age):
            return None
        return e

    def record(self, pools: Mapping[str, Sequence[Sample]], step: int) -> None:
        """Store, per prompt, this step's correct freshly generated sample of the highest `Sample.index` (the last
        submitted; arrival order under streaming may differ)."""
        for pid, pool in pools.items():
            good = [s for s in pool if _storable(s, self.threshold)]
            if good:
                s = max(good, key=lambda x: x.index)
                self.entries[pid] = Entry(
                    list(s.token_ids), [float(x) for x in s.logprobs], step, float(s.reward), s.text, s.finish_reason
                )

    def apply(self, groups: Sequence[Group], step: int) -> list[tuple[int, int, int]]:
        """Replace the last wrong sample of each all-wrong group that has a usable entry; returns (group index,
        sample index, age) of each replacement."""
        done = []
        for gi, g in enumerate(groups):
            if not g.samples or any(float(s.reward) > self.threshold for s in g.samples):  # type: ignore[arg-type]
                continue
            e = self.usable(g.prompt.id, step)
            if e is None:
                continue
            g.samples, g.pool_rewards = list(g.samples), list(g.pool_rewards)  # never edit the strategy's own lists
            si = len(g.samples) - 1
            old = g.samples[si]
            g.samples[si] = Sample(
                prompt_id=g.prompt.id,
                text=e.text,
                token_ids=list(e.token_ids),
                logprobs=list(e.logprobs),
                num_tokens=len(e.token_ids),
                finish_reason=e.finish_reason,
                reward=e.reward,
                round=old.round,
                index=old.index,
                replayed_from=e.step,
            )
            if float(old.reward) in g.pool_rewards:  # type: ignore[arg-type]
                g.pool_rewards.remove(float(old.reward))  # type: ignore[arg-type]
            g.pool_rewards.append(e.reward)
            done.append((gi, si, step - e.step))
        return done

    def state_dict(self) -> dict[str, Any]:
        return {"entries": {pid: asdict(e) for pid, e in self.entries.items()}}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.entries = {str(pid): Entry(**e) for pid, e in state["entries"].items()}


METRICS: dict[str, str] = {
    "replay_prompts": "Trained groups given a stored correct answer in place of a wrong sample this step.",
    "replay_share": "Replayed samples / trained samples.",
    "replay_buffer_size": "Prompts with a stored correct answer in the buffer after the step.",
    "replay_age_mean": "Mean age in steps of the answers replayed this step (nan when none).",
}
"""The ledger extras `replay_step` adds (`[replay] enabled`; docs/metrics.md)."""


def replay_step(buffer: ReplayBuffer, batch: StepBatch, strategy: Any, step: int) -> list[int]:
    """Apply replay to a finished step's batch (module docstring, 2 and 4), then store this step's correct answers.
    Returns the flat indices (in `rows.batch_rows` order) of the replayed samples."""
    done = buffer.apply(batch.groups, step)
    if done:
        advs, batch.weights = step_advantages(strategy.opts, batch.groups)
        batch.advantages = batch_normalize(batch.groups, advs, strategy.opts.batch_normalize)
        _refresh_ledger(batch)
    pools = getattr(strategy, "pools", None)
    if pools is None:  # a strategy without pools: its trained samples (replayed ones excluded)
        skip = {(gi, si) for gi, si, _ in done}
        pools = {}
        for gi, g in enumerate(batch.groups):
            pools.setdefault(g.prompt.id, []).extend(s for si, s in enumerate(g.samples) if (gi, si) not in skip)
    buffer.record(pools, step)
    trained = batch.ledger.samples_trained
    batch.ledger.extra.update(
        replay_prompts=len(done),
        replay_share=len(done) / trained if trained else 0.0,
        replay_buffer_size=len(buffer.entries),
        replay_age_mean=float(np.mean([a for _, _, a in done])) if done else float("nan"),
    )
    starts = np.cumsum([0] + [len(g.samples) for g in batch.groups])
    return [int(starts[gi]) + si for gi, si, _ in done]


def mark(rows: list[Any], replayed: Sequence[int]) -> list[Any]:
    """Flag the rows `replay_step` replayed (by their flat index); returns `rows`."""
    for i in replayed:
        rows[i].replayed = True
    return rows


def _refresh_ledger(batch: StepBatch) -> None:
    """The trained-side ledger fields after a replacement (the same formulas as `sampling.ledger.fill_ledger`)."""
    led, groups = batch.ledger, batch.groups
    led.tokens_trained = sum(completion_tokens(s) for g in groups for s in g.samples)
    led.zero_adv_prompts = sum(zero_advantage(a) for a in batch.advantages)
    led.zero_adv_prompt_share = led.zero_adv_prompts / max(1, len(groups))
    sampled = max(1, led.prompts - led.extra.get("overflow_prompts", 0))
    led.no_signal_prompt_share = 1.0 - (len(groups) - led.zero_adv_prompts) / sampled
    kept = [float(s.reward) for g in groups for s in g.samples]  # type: ignore[arg-type]
    led.reward_trained = float(np.mean(kept)) if kept else float("nan")


def replay_weights(
    rows: Sequence[Any],
    old_logp_BT: torch.Tensor,
    behaviour_logp_BT: torch.Tensor,
    mask_BT: torch.Tensor,
    clip: float,
    base_BT: torch.Tensor | None,
    correction: str = "sequence",
) -> torch.Tensor | None:
    """Per-token importance weights of a micro-batch: on replayed rows min(pi_old / pi_behaviour, clip) of the whole
    answer (`correction="sequence"`) or of each token (`"token"`), `base_BT` (the sampler/learner correction, or 1)
    on the others; `base_BT` itself when no row is replayed (module docstring, 3)."""
    flags = [bool(getattr(r, "replayed", False)) for r in rows]
    if not any(flags):
        return base_BT
    mode = {"sequence": "sequence_truncate", "token": "token_truncate"}[correction]
    w_BT, _ = importance_weights(old_logp_BT, behaviour_logp_BT, mask_BT, mode=mode, cap=clip)
    base = base_BT if base_BT is not None else torch.ones_like(w_BT)
    replayed_B = torch.tensor(flags, device=w_BT.device)
    return torch.where(replayed_B.unsqueeze(-1), w_BT, base.to(w_BT.dtype))


def fresh_mask(rows: Sequence[Any], mask_BT: torch.Tensor) -> torch.Tensor:
    """`mask_BT` with the replayed rows' tokens off: what the sampler/learner mismatch metrics may look at."""
    fresh_B = torch.tensor([not getattr(r, "replayed", False) for r in rows], device=mask_BT.device)
    return mask_BT.bool() & fresh_B.unsqueeze(-1)
