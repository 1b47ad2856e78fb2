"""Experience replay with a staleness cap: each step's trained groups are trained on again in the next steps.

`[replay] mode = "samples"` (our trainer only; `mode = "answers"` is AR3PO's reuse of correct answers,
`training.replay`):
1) After a step's update, its trained groups (their samples with the behaviour log-probs the engine returned) join a
   FIFO buffer tagged with the step. A later step trains, beside its own fresh groups, every buffered group generated
   at most `replay.max_age` steps ago (the staleness cap; required in this mode): with `max_age = 1` each group is
   trained in the step it was drawn and once more in the next, so the learner sees twice the samples per generated
   token.
2) Advantages of a replayed group are computed again at replay time, with the strategy's baseline rule: a tracker
   baseline (`advantage=tracker`, SPO) is the value the prompt had before the group's own samples were drawn
   (`Group.baseline`, kept with the group and checkpointed), so r - v_hat stays unbiased and the replayed advantage
   is the fresh one. (The prompt's value at replay time would not do: the tracker recorded the group's own outcomes
   when it was drawn, so that value depends on the rewards it scores and shrinks r - v_hat, by about half at a
   prompt's second visit; fixed after review.) A group saved without it (a checkpoint of an earlier version) reads
   the value at replay time. A group baseline reads the group itself and gives what it gave when fresh. Batch
   normalisation (`batch_normalize`) runs over the replayed groups on their own, as a second batch.
3) Off-policy correction is `training.replay`'s: a replayed row's PPO "old" policy is the learner's log-probs before
   the update, and its loss is weighted by the truncated ratio to the stored behaviour log-probs (`replay.clip`,
   `replay.correction`).
4) Accounting: replayed samples are trained, not generated: they add to `samples_trained` / `tokens_trained` only;
   metrics `experience_groups` (replayed groups this step) and `experience_share` (replayed / trained samples).
5) The buffer is checkpointed with the trainer's state, so a resumed run replays what the run would have.
Sources and departures: experience replay for LLM RL (arXiv 2604.08706, FAIR: a FIFO buffer sampled uniformly in
asynchronous RL, about 40% less compute to the same accuracy, per its authors' note) samples a fixed share from a
larger buffer; here every group younger than the cap is replayed (deterministic, no sampling state), and the
staleness is bounded in steps, not by a buffer size. Not in TRL's or verl's trainer: the integrations refuse it
(TRL's `num_iterations` and verl's `ppo_epochs` give the other reuse lever, more updates per batch: `optim.epochs`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

import numpy as np

from reinforce_ada.sampling.advantages import NEEDS_VALUE, batch_normalize
from reinforce_ada.sampling.ledger import Ledger, StepBatch, completion_tokens, step_advantages
from reinforce_ada.training.replay import ReplayBuffer, replay_step
from reinforce_ada.types import Group, Prompt, Sample


def replay_buffer(replay: Any, threshold: float) -> ReplayBuffer | ExperienceBuffer | None:
    """The store a `ReplayConfig` asks for: AR3PO's answers (`training.replay`), this module's samples, or None."""
    if not replay.enabled:
        return None
    return ExperienceBuffer(replay.max_age) if replay.mode == "samples" else ReplayBuffer(threshold, replay.max_age)


METRICS: dict[str, str] = {
    "experience_groups": "Only with replay.mode = samples: earlier steps' groups trained again this step.",
    "experience_share": "Only with replay.mode = samples: replayed samples over every trained sample of the step.",
}
"""The keys `account` writes (docs/metrics.md)."""


class ExperienceBuffer:
    """The FIFO of the module docstring: (step, groups) for the last `max_age` steps."""

    def __init__(self, max_age: int) -> None:
        self.max_age = max_age
        self.steps: list[tuple[int, list[Group]]] = []

    def due(self, step: int) -> list[Group]:
        """The buffered groups generated at most `max_age` steps before `step` (oldest first)."""
        self.steps = [(s, gs) for s, gs in self.steps if step - s <= self.max_age]  # older than the cap: gone
        return [g for s, gs in self.steps if s < step for g in gs]

    def add(self, step: int, groups: Sequence[Group]) -> None:
        kept = [g for g in groups if g.samples and all(_replayable(s) for s in g.samples)]
        if kept:
            self.steps.append((step, [_copy(g) for g in kept]))

    def state_dict(self) -> dict[str, Any]:
        return {"steps": [[s, [_group_state(g) for g in gs]] for s, gs in self.steps]}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.steps = [(int(s), [_group_from(g) for g in gs]) for s, gs in state["steps"]]


def experience_batch(buffer: ExperienceBuffer, strategy: Any, step: int) -> StepBatch | None:
    """The replayed groups due at `step` with advantages under the strategy's baseline now (module docstring, 2), or
    None when none is due."""
    groups = [_copy(g) for g in buffer.due(step)]
    if not groups:
        return None
    opts = strategy.opts
    stale = [g for g in groups if g.baseline is None]  # saved without it: the value now (module docstring, 2)
    if opts.advantage in NEEDS_VALUE and stale:
        strategy.memory.prefetch([g.prompt for g in stale])
        for g in stale:
            g.baseline = strategy.memory.value(g.prompt)
    advs, weights = step_advantages(opts, groups)
    advs = batch_normalize(groups, advs, opts.batch_normalize)
    return StepBatch(groups, advs, weights, Ledger())


def reuse(buffer: ReplayBuffer | ExperienceBuffer | None, batch: StepBatch, strategy: Any, step: int) -> Any:
    """What a finished step reuses, by the buffer `[replay]` built: (the flat indices of the earlier answers AR3PO's
    rule put into `batch`, `training.replay`; the earlier groups trained again, this module's, or None)."""
    if isinstance(buffer, ReplayBuffer):
        return replay_step(buffer, batch, strategy, step), None
    if isinstance(buffer, ExperienceBuffer):
        return [], experience_step(buffer, batch, strategy, step)
    return [], None


def experience_step(buffer: ExperienceBuffer, batch: StepBatch, strategy: Any, step: int) -> StepBatch | None:
    """The groups to train again at `step` (module docstring, 1-2), counted in `batch`'s ledger (4); then `batch`'s
    own groups join the buffer."""
    old = experience_batch(buffer, strategy, step)
    account(batch, old)
    buffer.add(step, batch.groups)
    return old


def account(fresh: StepBatch, replayed: StepBatch | None) -> None:
    """Module docstring, 4: the fresh batch's ledger counts the replayed samples as trained."""
    n = sum(len(g.samples) for g in replayed.groups) if replayed is not None else 0
    led = fresh.ledger
    if replayed is not None:
        led.samples_trained += n
        led.tokens_trained += sum(completion_tokens(s) for g in replayed.groups for s in g.samples)
    led.extra["experience_groups"] = len(replayed.groups) if replayed is not None else 0
    led.extra["experience_share"] = n / led.samples_trained if led.samples_trained else 0.0


def _replayable(s: Sample) -> bool:
    return len(s.token_ids) > 0 and len(s.logprobs) == len(s.token_ids) and bool(np.all(np.isfinite(s.logprobs)))


def _copy(g: Group) -> Group:
    return Group(g.prompt, list(g.samples), list(g.pool_rewards), g.weight, g.resolved, g.baseline)


def _group_state(g: Group) -> dict[str, Any]:
    return {
        "prompt": asdict(g.prompt),
        "samples": [asdict(s) for s in g.samples],
        "pool_rewards": list(g.pool_rewards),
        "weight": g.weight,
        "resolved": g.resolved,
        "baseline": g.baseline,
    }


def _group_from(d: dict[str, Any]) -> Group:
    samples = [Sample(**s) for s in d["samples"]]
    base = d.get("baseline")  # absent from an earlier version's checkpoint
    return Group(
        Prompt(**d["prompt"]),
        samples,
        [float(r) for r in d["pool_rewards"]],
        float(d["weight"]),
        bool(d["resolved"]),
        None if base is None else float(base),
    )
