"""`TRLEngine`: our `sampling.rounds.Engine` over a GRPOTrainer's own generation path and reward functions.

1) `generate(requests)` is one round: every request's prompt is repeated k times and handed to TRL's
   `_generate_single_turn` (transformers `generate`, transformers continuous batching, or vLLM colocate/server, as the
   config says), so the generation backend, its sampling settings and vLLM weight sync stay TRL's. The transformers
   path is called in chunks of at most the stock call's size (the local generation batch), so memory stays what
   stock TRL needs; vLLM gets the whole round.
2) The samples are decoded as TRL decodes them and scored by the trainer's reward functions (`trl_rewards`), so the
   driver sees scored samples; `errors` counts failed rewards.
3) Rounds are agreed across processes. Each round starts with one gather of (active?, rows, k): every process then
   makes the same generation calls -- the same number of chunks on the transformers path (ZeRO-3 and FSDP gather
   parameters collectively), the same number of rows for vLLM (server mode and tensor-parallel colocate slice
   results by rank) -- padding its share with dummy rows (the step's first prompt, discarded). A process whose
   strategy is done calls `drain()`, which keeps taking part with dummy rows until no process is active, so the
   processes leave the sampling loop together and nothing hangs when one process's prompts retire in round 1 and
   another's run to the cap.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from reinforce_ada.integrations.trl_rewards import reward_table
from reinforce_ada.types import Prompt, Request, Sample


@dataclass
class Scored:
    """What the replay needs of a sample beyond `Sample`: its per-function rewards and log_extra values."""

    sample: Sample
    per_func: np.ndarray
    extra: dict[str, Any] = field(default_factory=dict)


class TRLEngine:
    def __init__(self, trainer: Any, chunk: int):
        self.trainer = trainer
        self.chunk = chunk
        """Most rows per transformers `generate` call (the local generation batch, as in stock TRL)."""
        self._reset()

    def _reset(self) -> None:
        self.rows: dict[str, dict[str, Any]] = {}
        """Prompt id -> its dataset row (the reward functions' columns)."""
        self.prompt_ids: dict[str, list[int]] = {}
        self.scored: dict[int, Scored] = {}
        """id(sample) -> Scored (the Scored holds the sample, so ids are not reused within a step)."""
        self.errors = 0
        self.ticks = 0
        self.dummy_rows = 0

    def start(self, prompts: Sequence[Prompt], rows: Sequence[dict[str, Any]]) -> None:
        """Begin a step: tokenize the step's prompts once, as TRL does."""
        self._reset()
        self.add(prompts, rows)
        self.first = prompts[0].id

    def add(self, prompts: Sequence[Prompt], rows: Sequence[dict[str, Any]]) -> None:
        if not prompts:
            return
        ids, _, _ = self.trainer._tokenize_prompts([r["prompt"] for r in rows])
        for p, r, t in zip(prompts, rows, ids, strict=True):
            self.rows[p.id], self.prompt_ids[p.id] = r, list(t)

    # -- the Engine protocol --------------------------------------------------------------------------------------
    def generate(self, requests: Sequence[Request]) -> list[Sample]:
        flat = [r.prompt.id for r in requests for _ in range(r.k)]
        ks = {r.k for r in requests}
        samples = self._tick(flat, ks.pop() if len(ks) == 1 else 1)
        assert samples is not None  # a process with requests is active, so the round runs
        return samples

    def drain(self) -> None:
        """Take part in the other processes' rounds until none is active (a no-op in a single process)."""
        if self.trainer.accelerator.num_processes > 1:
            while self._tick([], 0) is not None:
                pass

    # -- one agreed round -----------------------------------------------------------------------------------------
    def _agree(self, rows: int, k: int) -> tuple[int, int] | None:
        """(max rows over processes, common k or 1), or None when no process is active. One gather."""
        acc = self.trainer.accelerator
        if acc.num_processes == 1:
            return (rows, k) if rows else None
        mine = torch.tensor([float(rows > 0), float(rows), float(k)], device=acc.device)
        table = acc.gather(mine).view(-1, 3).cpu()
        active = table[table[:, 0] > 0]
        if len(active) == 0:
            return None
        ks = set(active[:, 2].long().tolist())
        return int(active[:, 1].max()), (ks.pop() if len(ks) == 1 else 1)

    def _tick(self, flat: list[str], k: int) -> list[Sample] | None:
        agreed = self._agree(len(flat), k)
        if agreed is None:
            return None
        max_rows, k_all = agreed
        self.ticks += 1
        if self.trainer.use_vllm:  # one call, the same number of rows everywhere (whole blocks of k_all)
            calls = [flat + [self.first] * (max_rows - len(flat))]
        else:  # the same number of chunks everywhere, each with at least one row
            n_calls = max(1, math.ceil(max_rows / self.chunk))
            calls = [flat[i * self.chunk : (i + 1) * self.chunk] or [self.first] for i in range(n_calls)]
        completion_ids: list = []
        logprobs: list | None = []
        for call in calls:
            real = min(len(call), len(flat) - len(completion_ids))
            self.dummy_rows += len(call) - real
            ids, lps = self.trainer._generate_single_turn(
                [self.prompt_ids[pid] for pid in call], None, {}, k_all if self.trainer.use_vllm else 1
            )
            completion_ids += list(ids[:real])
            logprobs = logprobs + list(lps[:real]) if lps is not None and logprobs is not None else None
        return self._score(flat, completion_ids, logprobs) if flat else []

    def _score(self, pids: list[str], completion_ids: list, logprobs: list | None) -> list[Sample]:
        """Decode and score a whole round at once (one call per reward function, as TRL makes per batch)."""
        t = self.trainer
        completion_ids = [list(map(int, c)) for c in completion_ids]
        prompts = [self.rows[pid]["prompt"] for pid in pids]
        texts = t.processing_class.batch_decode(completion_ids, skip_special_tokens=True)
        completions = self.decode(prompts, [self.prompt_ids[pid] for pid in pids], completion_ids, texts)
        per_func, reward, errors, extra = reward_table(
            t, [self.rows[pid] for pid in pids], prompts, completions, completion_ids
        )
        self.errors += errors
        eos = set(t.eos_token_ids)
        out = []
        for j, (pid, ids) in enumerate(zip(pids, completion_ids, strict=True)):
            s = Sample(
                prompt_id=pid,
                text=texts[j],
                token_ids=ids,
                logprobs=[math.nan if x is None else float(x) for x in logprobs[j]] if logprobs else [],
                num_tokens=len(ids),
                finish_reason="eos" if ids and ids[-1] in eos else "length",
                reward=float(reward[j]),
                prompt_tokens=len(self.prompt_ids[pid]),
            )
            self.scored[id(s)] = Scored(s, per_func[j], extra.row(j))
            out.append(s)
        return out

    def decode(self, prompts: list, prompt_ids: list[list[int]], completion_ids: list[list[int]], texts: list[str]):
        """Completions as TRL's `_generate` hands them to reward functions (text, or assistant messages); `texts` is
        `batch_decode(completion_ids, skip_special_tokens=True)`."""
        from trl.chat_template_utils import parse_response
        from trl.data_utils import is_conversational

        t = self.trainer
        if not is_conversational({"prompt": prompts[0]}):
            return texts
        tok = t._tokenizer
        if getattr(tok, "response_template", None) is not None or getattr(tok, "response_schema", None) is not None:
            return [
                [parse_response(tok, ids, prefix=p, tools=t.tools)]
                for ids, p in zip(completion_ids, prompt_ids, strict=True)
            ]
        return [[{"role": "assistant", "content": c}] for c in texts]
