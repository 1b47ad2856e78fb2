"""One training step of reinforce-ada sampling over verl's rows and uids (no trainer, no TransferQueue here).

verl's v1 sync trainer fetches prompt rows from its dataloader (a `TensorDict` with a fresh `uid` per row), puts one
prompt tag per uid into TransferQueue and asks its agent loop for `rollout.n` sessions per uid, or `__rollout_n__`
where a row carries one. `StepDriver` runs our strategy protocol (`sampling.protocol`) on top of that:
1) `begin(num_prompts)` takes rows from `fetch_batch` (verl's `_fetch_one_gen_batch`; rows beyond what a step asks
   for wait in `spare` for the next refill or step), turns them into our `Prompt`s keyed on verl's dataset `index`
   (uids are fresh per fetch, so prompt memory follows the index) and begins the strategy;
2) every `Request(prompt, k)` the strategy proposes becomes one dispatched row: the prompt's row with a fresh uid and
   `__rollout_n__ = k` (`dispatch`: the trainer's `_submit_batch_to_rollout`). Seq's second round of a prompt is a
   second uid of the same row; refills (`wanted_prompts`, DAPO) come from `fetch_batch` as well;
3) `observe(uid, sessions)`: a finished uid's sessions, numbered by submission ordinal (the first session of a
   request is the prompt's `sent` count when it was proposed), go to `strategy.observe`; the strategy may propose
   more, which are dispatched at once (no barrier across prompts, as `sampling.streaming`);
4) `finish()` once the strategy is done: `sampling.ledger.finish` builds the groups, advantages and weights; the
   kept sessions' trajectory keys and one scalar per key (advantage x per-prompt weight, as our trainer's loss and
   the TRL integration multiply them) are what the trainer hands to verl's actor.
Departures: a session that failed in verl's agent loop (no trajectory) counts as reward 0 for the strategy and is
never trained on (`failed_samples`); the agent loop cannot cancel a running session, so `in_flight` is "cancel"
without prefetch (no sample is ever late); rows in `spare` are not checkpointed (verl's dataloader state has moved
past them, so a resume skips at most one gen batch of prompts).
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from reinforce_ada.integrations.verl_checks import require_verl

require_verl("reinforce_ada.integrations.verl_driver")  # one error naming the missing packages and the pip command

import numpy as np  # noqa: E402
import torch  # noqa: E402
from tensordict import TensorDict  # noqa: E402

from reinforce_ada.errors import ConfigError  # noqa: E402
from reinforce_ada.sampling.config import StrategyConfig  # noqa: E402
from reinforce_ada.sampling.configure import changed_options  # noqa: E402
from reinforce_ada.sampling.ledger import Ledger, StepBatch, finish  # noqa: E402
from reinforce_ada.sampling.length import refuse_length_cap  # noqa: E402
from reinforce_ada.sampling.memory import refuse_drift, refuse_oracle  # noqa: E402
from reinforce_ada.sampling.strategies import build_strategy  # noqa: E402
from reinforce_ada.types import Prompt, Request, Sample  # noqa: E402

ROLLOUT_N = "__rollout_n__"
"""The per-row sample count verl's `AgentLoopWorkerTQ._run_prompt` pops (verl >= 0.9)."""


@dataclass
class Session:
    """One finished agent-loop session of a uid: its reward and the TransferQueue keys of its outputs."""

    session_id: int
    reward: float
    keys: list[str]
    """`{uid}_{session_id}_{i}` for each output (empty when the session failed)."""
    num_tokens: int = 0


@dataclass
class Submission:
    uid: str
    prompt_id: str
    first: int
    """Submission ordinal of session 0 within the prompt's step."""
    k: int


@dataclass
class Trained:
    """What a finished step hands to verl: kept trajectory keys, one scalar per key, keys to drop, the ledger."""

    keys: list[str]
    advantage: dict[str, float]
    discard: list[str]
    batch: StepBatch
    metrics: dict[str, float] = field(default_factory=dict)


def _value(column: Any, i: int) -> Any:
    item = column[i]
    if isinstance(item, torch.Tensor):
        return item.item() if item.dim() == 0 else item.tolist()
    return getattr(item, "data", item)


def row_prompt(rows: TensorDict, i: int) -> Prompt:
    """Our `Prompt` for row i of a verl batch: id = the dataset `index` (verl's `extra_info.index`)."""
    if "index" not in rows.keys():
        raise ConfigError("verl rows carry no 'index': set extra_info.index in the parquet rows (verl's preprocessing)")
    index = _value(rows["index"], i)
    raw = _value(rows["raw_prompt"], i) if "raw_prompt" in rows.keys() else ""
    if isinstance(raw, list | tuple):  # chat messages
        raw = "\n".join(str(m.get("content", "")) if isinstance(m, dict) else str(m) for m in raw)
    answer = ""
    if "reward_model" in rows.keys():
        rm = _value(rows["reward_model"], i)
        answer = str(rm.get("ground_truth", "")) if isinstance(rm, dict) else ""
    return Prompt(id=str(index), text=str(raw), answer=answer)


class StepDriver:
    """The strategy protocol over verl rows (module docstring). `fetch_batch()` returns verl rows (a TensorDict);
    `dispatch(rows)` registers and submits them (rows carry `uid` and `__rollout_n__`)."""

    def __init__(
        self,
        cfg: StrategyConfig,
        *,
        fetch_batch: Callable[[], TensorDict],
        dispatch: Callable[[TensorDict], Any],
        new_uid: Callable[[], str] = lambda: str(uuid.uuid4()),
    ):
        refuse_oracle(cfg.options.estimator, "the verl plugin", option="ada.estimator")
        refuse_drift(cfg.options.forgetting, "the verl plugin", option="ada.forgetting")
        refuse_length_cap(cfg.options.length_cap, "the verl plugin", option="ada.length_cap")
        self.cfg = cfg
        self.strategy = build_strategy(cfg)
        self.fetch_batch, self.dispatch, self.new_uid = fetch_batch, dispatch, new_uid
        self.spare: list[tuple[TensorDict, int]] = []
        self.steps = 0
        self._reset()

    def _reset(self) -> None:
        self.rows: dict[str, tuple[TensorDict, int]] = {}
        self.sent: dict[str, int] = {}
        self.outstanding: dict[str, Submission] = {}
        self.keys: dict[tuple[str, int], list[str]] = {}
        self.all_keys: list[str] = []
        self.uids: list[str] = []
        self.ledger = Ledger()
        self.failed = 0
        self.t0 = time.perf_counter()

    # -- prompts ----------------------------------------------------------------------------------------------------
    def _take(self, count: int) -> list[Prompt]:
        while len(self.spare) < count:
            rows = self.fetch_batch()
            if len(rows) == 0:
                break
            self.spare.extend((rows, i) for i in range(len(rows)))
        taken, self.spare = self.spare[:count], self.spare[count:]
        prompts = []
        for rows, i in taken:
            p = row_prompt(rows, i)
            if p.id in self.rows:
                raise ConfigError(
                    f"dataset index {p.id} appears twice in one step: extra_info.index must be unique per row "
                    "(verl's rl_dataset defaults it to 0 when missing)"
                )
            self.rows[p.id], self.sent[p.id] = (rows, i), 0
            prompts.append(p)
        return prompts

    def begin(self, num_prompts: int) -> None:
        self._reset()
        self.steps += 1
        self.strategy.begin(self._take(num_prompts), in_flight="cancel", prefetch=False)
        self.pump()

    def pump(self) -> None:
        while want := self.strategy.wanted_prompts():
            self.strategy.add_prompts(self._take(want))
        self._submit(self.strategy.propose())

    def _submit(self, requests: Sequence[Request]) -> None:
        if not requests:
            return
        from verl.utils import tensordict_utils as tu

        parts, uids, counts = [], [], []
        for r in requests:
            rows, i = self.rows[r.prompt.id]
            parts.append(tu.index_select_tensor_dict(rows, [i]))
            uid = self.new_uid()
            self.outstanding[uid] = Submission(uid, r.prompt.id, self.sent[r.prompt.id], r.k)
            self.sent[r.prompt.id] += r.k
            uids.append(uid)
            counts.append(int(r.k))
        batch = parts[0] if len(parts) == 1 else tu.concat_tensordict(parts)
        tu.assign_non_tensor_stack(batch, "uid", uids)
        tu.assign_non_tensor_stack(batch, ROLLOUT_N, counts)
        self.uids.extend(uids)
        self.dispatch(batch)

    # -- results ----------------------------------------------------------------------------------------------------
    def observe(self, uid: str, sessions: Sequence[Session], *, pump: bool = True) -> None:
        """A dispatched uid finished; sessions missing from `sessions` failed (reward 0, never trained).
        `pump=False` defers refills and new requests to the next `pump()` (one dispatch for many finished uids)."""
        sub = self.outstanding.pop(uid, None)
        if sub is None:
            raise ValueError(f"uid {uid!r} was not dispatched by this step or was observed twice")
        by_id = {s.session_id: s for s in sessions}
        unknown = sorted(set(by_id) - set(range(sub.k)))
        if unknown:
            raise ValueError(f"uid {uid!r} asked for {sub.k} sessions but returned session ids {unknown}")
        samples = []
        for sid in range(sub.k):
            s = by_id.get(sid)
            if s is None or not s.keys:
                self.failed += 1
            ordinal = sub.first + sid
            reward = float(s.reward) if s is not None and s.keys else 0.0
            keys = list(s.keys) if s is not None else []
            self.keys[(sub.prompt_id, ordinal)] = keys
            self.all_keys.extend(keys)
            tokens = s.num_tokens if s is not None else 0
            samples.append(Sample(sub.prompt_id, reward=reward, index=ordinal, num_tokens=tokens))
        self.ledger.samples_generated += len(samples)
        self.ledger.tokens_generated += sum(s.num_tokens for s in samples)
        self.ledger.max_completion_tokens = max([self.ledger.max_completion_tokens, *(s.num_tokens for s in samples)])
        self.strategy.observe(samples)  # no prefetch: nothing is ever in flight for a stopped prompt
        if pump:
            self.pump()

    def done(self) -> bool:
        return not self.outstanding and self.strategy.done()

    def finish(self) -> Trained:
        if not self.done():
            raise RuntimeError(f"step not finished: {len(self.outstanding)} uids outstanding")
        self.ledger.time_generate_s = time.perf_counter() - self.t0
        batch = finish(self.strategy, self.ledger)
        keys, advantage = [], {}
        for g, adv_R, w in zip(batch.groups, batch.advantages, batch.weights, strict=True):
            for s, a in zip(g.samples, adv_R, strict=True):
                for key in self.keys[(g.prompt.id, s.index)]:
                    keys.append(key)
                    advantage[key] = float(a) * float(w)
        kept = set(keys)
        discard = [k for k in self.all_keys if k not in kept] + self.uids
        self.ledger.extra["failed_samples"] = self.failed
        metrics = {
            f"ada/{k}": float(v)
            for k, v in batch.ledger.as_metrics().items()
            if isinstance(v, int | float | np.number) and not isinstance(v, bool)
        }
        return Trained(keys, advantage, discard, batch, metrics)

    # -- checkpointing (between steps) ------------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        return {"steps": self.steps, "config": self.cfg.to_dict(), "strategy": self.strategy.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        changed = changed_options(state["config"], self.cfg)
        if changed:
            raise ConfigError(f"the checkpoint's strategy differs from ada.* in fields {changed}; keep them equal")
        self.steps = int(state["steps"])
        self.strategy.load_state_dict(json.loads(json.dumps(state["strategy"])))
