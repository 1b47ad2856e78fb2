"""Cross-step prompt memory: what the sampler remembers about each prompt between steps.

`PromptMemory` is the one memory object a strategy owns (every strategy has one; those that need it read it):
1) the pass-rate tracker (`tracker.PassRateTracker`, the paper's Ada-EMA); per prompt its visits, the step it was last
   seen, its last `history` outcomes (Knapsack RL's reward buffer), its zero-variance streak (GRESO: +c after c
   consecutive all-correct visits, -c all-wrong), and whether it was evicted (Pilot-Commit's solved prompts: a visit
   pass rate >= `evict_at`, judged on the whole visit's pool -- Pilot-Commit judges the pilot, which is the whole pool
   of every prompt it does not commit);
2) a step counter (one `PoolStrategy.begin` with prompts = one step) and the last step's zero-variance shares;
3) optionally a learned `DifficultyPredictor` (`estimator = predictor | both`). It is fitted on the visits of a step
   at the start of the next one, so every estimate within a step comes from the same model, whatever order samples
   arrive in: the round and streaming drivers draw from the same law;
4) `estimate(prompt)` and `posterior(prompt)` (a Beta) by `estimator`: tracker (the prompt's own visits),
   predictor (the model), both (the model's p as the tracker's prior mean, strength prior_alpha + prior_beta), level
   (the prompt's level's running pass rate as that prior mean), prior (the prior's mean alone, never updated: a
   static offline value), or oracle (an attached
   `oracle.PassRateOracle`: the exact rate under the current policy, a Beta of strength `ORACLE_STRENGTH`
   on it; a benchmark ceiling, never checkpointed -- it is recomputed from the weights). A `prior_file` gives the
   prior mean of the prompts it lists, and `prior_decays` makes the prior the first counts (`priors`);
   `forgetting="drift"` discounts each visit by SPO's KL-adaptive factor instead of `decay` (`forgetting`).
   `prefetch(prompts)` lets a strategy that reads many estimates at once ask the oracle in one batched call;
5) completion lengths (`select=value`'s cost): per prompt an EMA of its visits' mean tokens per sample (weight
   `LENGTH_EMA` on the newest visit), the running mean over every recorded sample of each difficulty level, and
   over every recorded sample; `tokens_per_sample(prompt)` reads the prompt's EMA, else its level's running mean (a
   prompt never drawn is priced by what its level shows: the length guess a token-priced allocation needs while
   prompts do not come back), else the running mean over all, else 1. Visits recorded without lengths (or all of
   length 0) leave them unchanged. Beside it, an EMA of the mean length of the visit's correct answers
   (`correct_tokens`: the relative length cap's yardstick, `sampling.length`).
6) `forget` < 1 (ours; off by default): `posterior` reads a prompt's counts discounted by forget^(steps since its last
   visit), so a belief formed many steps ago (a prompt that failed early, never revisited by a greedy selection)
   widens back toward its prior as the policy moves on. The stored counts are unchanged; `decay` still discounts
   per visit.
7) the value (`value(prompt)`, the tracker baseline's v_hat, SPO's): the expected *reward*, not the pass rate -- the
   tracker's reward mass (rewards clipped into [0, 1]) in place of its correct count, under the same prior, so
   r - v_hat centres under partial credit too (0.4 subtracted the pass-rate estimate from the raw reward). With 0/1
   rewards the two are one number.
A visit is recorded when the prompt stops sampling, from the pool at that moment (samples kept after the stop under
`in_flight="keep"` are not counted). Everything round-trips through `state_dict` as JSON.
"""

from __future__ import annotations

import math
from dataclasses import asdict
from typing import Any

from reinforce_ada.sampling.memory.forgetting import DriftForgetting, Scorer
from reinforce_ada.sampling.memory.options import USES_PREDICTOR, MemoryOptions, resolved_evict
from reinforce_ada.sampling.memory.oracle import PassRateOracle, missing_oracle
from reinforce_ada.sampling.memory.predictor import DifficultyPredictor
from reinforce_ada.sampling.memory.priors import LevelRates, file_rate, read_prior_file
from reinforce_ada.sampling.memory.tracker import PassRateTracker
from reinforce_ada.types import Prompt

ORACLE_STRENGTH = 1e6
"""a + b of the oracle's Beta: Thompson draws from it (MoPPS) sit within ~1e-3 of the exact rate."""
ORACLE_CLIP = 1e-9
"""Oracle rates are clipped into (ORACLE_CLIP, 1 - ORACLE_CLIP) in the Beta (numpy's beta refuses a 0 parameter)."""
PRIOR_FLOOR = 1e-6
"""Beta parameters and prior means are kept at least this far from 0 (and means from 1): numpy's beta refuses 0."""
LENGTH_EMA = 0.5
"""Weight of a visit's mean completion length in the prompt's length EMA (module docstring, 5)."""


class PromptMemory:
    """The memory of the module docstring, built from a strategy's options (`MemoryOptions` and the modes' own:
    `estimator=predictor|both` brings the predictor's, `forgetting=drift` the drift's)."""

    def __init__(self, opts: MemoryOptions):
        self.forget, self.history, self.estimator = opts.forget, opts.history, opts.estimator
        self.evict_at = resolved_evict(opts)
        """Pilot-Commit's eviction threshold (`evict`), None when off."""
        self.tracker = PassRateTracker(alpha=opts.prior_alpha, beta=opts.prior_beta, decay=opts.decay)
        self.predictor = DifficultyPredictor.from_options(opts) if opts.estimator in USES_PREDICTOR else None
        self.prior_rates = read_prior_file(opts.prior_file) if opts.prior_file else None
        """A pass-rate file's prior means (`priors`)."""
        self.prior_decays = opts.prior_decays
        self.prior_strength = opts.prior_strength
        """The strength of an informative prior mean (None: the flat prior's alpha + beta)."""
        """SPO's rule: the prior is the prompt's first counts, forgotten with them."""
        self.drift = DriftForgetting.from_options(opts) if opts.forgetting == "drift" else None
        """forgetting="drift": each visit's discount from the policy's movement since the prompt's last visit."""
        self.levels = LevelRates(opts.decay)
        """The running pass rate of each difficulty level (`estimator=level`'s prior; kept for every estimator)."""
        self.step = 0
        self.visits: dict[str, int] = {}
        self.last_seen: dict[str, int] = {}
        self.recent: dict[str, str] = {}
        """prompt id -> its last `history` outcomes, oldest first, as '0'/'1' characters (compact in JSON)."""
        self.last_visit: dict[str, tuple[int, int]] = {}
        """prompt id -> (correct, drawn) of its latest visit."""
        self.streak: dict[str, int] = {}
        self.evicted: set[str] = set()
        self.stats = _zero_stats()
        """This step's visits, all-correct and all-wrong visits (GRESO adapts to the last step's shares)."""
        self.last_stats = _zero_stats()
        self.pending: list[tuple[Prompt, int, int]] = []
        """Visits of this step not yet shown to the predictor."""
        self.oracle: PassRateOracle | None = None
        """estimator="oracle": the exact pass rates under the current policy (attached by the trainer or simulator)."""
        self.tokens: dict[str, float] = {}
        """prompt id -> EMA of its visits' mean completion length in tokens per sample."""
        self.token_total = (0.0, 0)
        self.level_tokens: dict[str, tuple[float, int]] = {}
        """str(level) -> (tokens, samples) recorded for that level's prompts (module docstring, 5)."""
        """(tokens, samples) over every visit recorded with lengths: the fallback mean for unmeasured prompts."""
        self.correct_tokens: dict[str, float] = {}
        """prompt id -> EMA of its visits' mean length of correct answers (visits with one; module docstring, 5)."""

    def attach(
        self,
        *,
        oracle: PassRateOracle | None = None,
        scorer: Scorer | None = None,
        prior_rates: dict[str, float] | None = None,
    ) -> None:
        """What the caller provides beside the samples: the exact pass rates behind `estimator=oracle`, the policy's
        log-probs of earlier responses behind `forgetting=drift` (each kept only where the options use it), and
        prior means measured by sampling (they replace a prior file's: SPO's offline pass, `bench.run.prior_pass`)."""
        if oracle is not None and self.estimator == "oracle":
            self.oracle = oracle
        if scorer is not None and self.drift is not None:
            self.drift.scorer = scorer
        if prior_rates is not None:
            self.prior_rates = prior_rates

    def _oracle(self) -> PassRateOracle:
        if self.oracle is None:
            raise missing_oracle()
        return self.oracle

    def prefetch(self, prompts: list[Prompt]) -> None:
        """About to read the estimates of all `prompts`: the oracle computes the uncached ones in one batched call
        (a no-op for the other estimators)."""
        if self.estimator == "oracle":
            self._oracle().prefetch(prompts)

    # -- steps and visits -------------------------------------------------------------------------------------------
    def new_step(self) -> None:
        if self.predictor is not None:
            for prompt, correct, total in self.pending:
                self.predictor.update(prompt, correct, total)
        self.pending = []
        self.last_stats, self.stats = self.stats, _zero_stats()
        self.levels.new_step()
        if self.drift is not None:
            self.drift.new_step()
        self.step += 1

    def record(
        self,
        prompt: Prompt,
        outcomes: list[bool],
        tokens: list[int] | None = None,
        response: tuple[list[int], list[float]] | None = None,
        rewards: list[float] | None = None,
    ) -> None:
        """One visit: the prompt's outcomes (correct or not) in this step's pool, and optionally each sample's
        completion length in tokens (module docstring, 5) and reward (the value's mass, module docstring, 7; by
        default the outcomes as 0/1)."""
        if not outcomes:
            return
        if tokens:
            self._record_tokens(prompt, tokens)
            right = [t for t, y in zip(tokens, outcomes, strict=True) if y]
            if right:  # the length of a correct answer: the relative length cap's yardstick (`sampling.length`)
                self._ema(self.correct_tokens, prompt.id, sum(right) / len(right))
        pid, k, n = prompt.id, sum(outcomes), len(outcomes)
        mass = None if rewards is None else reward_mass(rewards, n)
        if self.prior_decays and pid not in self.tracker.counts:  # SPO: the prior is the first counts
            a0, b0 = self.posterior(prompt)
            self.tracker.counts[pid] = (a0, a0 + b0)
        self.tracker.update(pid, k, n, decay=None if self.drift is None else self.drift.rho(pid), mass=mass)
        self.levels.add(prompt.level, k, n)
        if self.drift is not None and response is not None:
            self.drift.remember(pid, *response)
        self.visits[pid] = self.visits.get(pid, 0) + 1
        self.last_seen[pid] = self.step
        self.recent[pid] = (self.recent.get(pid, "") + "".join("1" if y else "0" for y in outcomes))[-self.history :]
        self.last_visit[pid] = (k, n)
        s = self.streak.get(pid, 0)
        if k == n:
            self.streak[pid] = s + 1 if s > 0 else 1
        elif k == 0:
            self.streak[pid] = s - 1 if s < 0 else -1
        else:
            self.streak.pop(pid, None)
        if self.evict_at is not None and k / n >= self.evict_at:
            self.evicted.add(pid)
        self.stats["visits"] += 1
        self.stats["all_correct"] += int(k == n)
        self.stats["all_wrong"] += int(k == 0)
        if self.predictor is not None:
            self.pending.append((prompt, k, n))

    def _record_tokens(self, prompt: Prompt, tokens: list[int]) -> None:
        total = float(sum(tokens))
        if not (math.isfinite(total) and total > 0):
            return
        self._ema(self.tokens, prompt.id, total / len(tokens))
        self.token_total = (self.token_total[0] + total, self.token_total[1] + len(tokens))
        if prompt.level is not None:
            t, c = self.level_tokens.get(str(prompt.level), (0.0, 0))
            self.level_tokens[str(prompt.level)] = (t + total, c + len(tokens))

    @staticmethod
    def _ema(table: dict[str, float], pid: str, mean: float) -> None:
        if math.isfinite(mean) and mean > 0:
            old = table.get(pid)
            table[pid] = mean if old is None else (1.0 - LENGTH_EMA) * old + LENGTH_EMA * mean

    def tokens_per_sample(self, prompt: Prompt) -> float:
        """Expected completion length of one sample of `prompt` (module docstring, 5)."""
        if prompt.id in self.tokens:
            return self.tokens[prompt.id]
        total, count = self.level_tokens.get(str(prompt.level), (0.0, 0)) if prompt.level is not None else (0.0, 0)
        if count:
            return total / count
        total, count = self.token_total
        return total / count if count else 1.0

    # -- estimates --------------------------------------------------------------------------------------------------
    def posterior(self, prompt: Prompt) -> tuple[float, float]:
        """Beta(a, b) belief about the prompt's pass rate, by `estimator` (module docstring, 4)."""
        if self.estimator == "oracle":
            return oracle_prior(self._oracle().rate(prompt))
        t = self.tracker
        if self.estimator == "prior":  # the prior's mean alone, static (A*-PO's offline value)
            m = self.prior_mean(prompt)
            return oracle_prior(t.alpha / (t.alpha + t.beta) if m is None else m)
        n_pos, n_tot = t.counts.get(prompt.id, (0.0, 0.0))
        if self.forget < 1.0 and prompt.id in self.last_seen:  # module docstring, 6
            w = self.forget ** (self.step - self.last_seen[prompt.id])
            n_pos, n_tot = w * n_pos, w * n_tot
        if self.prior_decays and prompt.id in t.counts:  # the prior is inside the counts (SPO)
            return max(n_pos, PRIOR_FLOOR), max(n_tot - n_pos, PRIOR_FLOOR)
        m, s = self.prior_mean(prompt), self.prior_strength or t.alpha + t.beta
        if m is None:
            return n_pos + t.alpha, n_tot - n_pos + t.beta
        m = min(max(m, PRIOR_FLOOR), 1.0 - PRIOR_FLOOR)
        if self.estimator == "predictor":
            return m * s, (1 - m) * s
        return n_pos + m * s, n_tot - n_pos + (1 - m) * s

    def prior_mean(self, prompt: Prompt) -> float | None:
        """The mean of the prompt's prior before its own visits (`priors`), or None for the flat prior."""
        rate = file_rate(self.prior_rates, prompt)
        if rate is not None:
            return rate
        if self.estimator in USES_PREDICTOR:
            assert self.predictor is not None
            return self.predictor.predict(prompt)
        return self.levels.mean(prompt.level) if self.estimator == "level" else None

    def estimate(self, prompt: Prompt) -> float:
        if self.estimator == "oracle":
            return self._oracle().rate(prompt)
        a, b = self.posterior(prompt)
        return a / (a + b)

    def value(self, prompt: Prompt) -> float:
        """The prompt's expected reward (module docstring, 7): `estimate` with the reward mass in place of the
        correct count -- the same number under 0/1 rewards and for every prompt not yet visited."""
        t = self.tracker
        if self.estimator in ("oracle", "prior") or prompt.id not in t.mass:
            return self.estimate(prompt)
        a, b = self.posterior(prompt)
        n_pos = t.counts[prompt.id][0]
        shift = t.mass[prompt.id] - n_pos  # the Beta's a counts correct samples; the value counts reward mass
        if self.forget < 1.0 and prompt.id in self.last_seen:
            shift *= self.forget ** (self.step - self.last_seen[prompt.id])
        total = a + b  # the evidence behind the belief is the same: only what it counts changes
        return min(max(a + shift, PRIOR_FLOOR), total - PRIOR_FLOOR) / total

    def recent_rate(self, prompt_id: str, rule: str = "recent") -> float | None:
        """Mean of the remembered outcomes once at least half the buffer is filled (Knapsack RL's rule), else None.

        `rule="last_visit"` (Knapsack RL's released code): the latest visit's own pass rate when that visit alone
        drew >= `history` samples, else the same mean of the last `history` outcomes."""
        k_n = self.last_visit.get(prompt_id)
        if rule == "last_visit" and k_n is not None and k_n[1] >= self.history:
            return k_n[0] / k_n[1]
        r = self.recent.get(prompt_id, "")
        return r.count("1") / len(r) if len(r) >= max(1, self.history // 2) else None

    # -- checkpointing ----------------------------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        return {
            "tracker": self.tracker.state_dict(),
            "step": self.step,
            "visits": dict(self.visits),
            "last_seen": dict(self.last_seen),
            "recent": dict(self.recent),
            "last_visit": {pid: list(kn) for pid, kn in self.last_visit.items()},
            "streak": dict(self.streak),
            "evicted": sorted(self.evicted),
            "stats": dict(self.stats),
            "last_stats": dict(self.last_stats),
            "pending": [[asdict(p), k, n] for p, k, n in self.pending],
            "predictor": None if self.predictor is None else self.predictor.state_dict(),
            "tokens": dict(self.tokens),
            **({"correct_tokens": dict(self.correct_tokens)} if self.correct_tokens else {}),
            "token_total": list(self.token_total),
            **({"level_tokens": {k: list(v) for k, v in self.level_tokens.items()}} if self.level_tokens else {}),
            "levels": self.levels.state_dict(),
            **({"drift": self.drift.state_dict()} if self.drift is not None else {}),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.tracker.load_state_dict(state["tracker"])
        self.step = state["step"]
        self.visits, self.last_seen = dict(state["visits"]), dict(state["last_seen"])
        self.recent, self.streak = dict(state["recent"]), dict(state["streak"])
        self.last_visit = {pid: (int(k), int(n)) for pid, (k, n) in state.get("last_visit", {}).items()}
        self.evicted = set(state["evicted"])
        self.stats, self.last_stats = dict(state["stats"]), dict(state["last_stats"])
        self.pending = [(Prompt(**p), k, n) for p, k, n in state["pending"]]
        if self.predictor is not None and state["predictor"] is not None:
            self.predictor.load_state_dict(state["predictor"])
        # states saved before completion lengths were remembered have neither key
        self.tokens = {pid: float(v) for pid, v in state.get("tokens", {}).items()}
        self.correct_tokens = {pid: float(v) for pid, v in state.get("correct_tokens", {}).items()}
        total, count = state.get("token_total", (0.0, 0))
        self.token_total = (float(total), int(count))
        self.level_tokens = {k: (float(t), int(c)) for k, (t, c) in state.get("level_tokens", {}).items()}
        if "levels" in state:  # absent before the level prior
            self.levels.load_state_dict(state["levels"])
        if self.drift is not None and "drift" in state:
            self.drift.load_state_dict(state["drift"])


def reward_mass(rewards: list[float], n: int) -> float:
    """A visit's reward mass: its rewards clipped into [0, 1], summed (a non-finite reward counts 0)."""
    if len(rewards) != n:
        raise ValueError(f"a visit of {n} outcomes came with {len(rewards)} rewards")
    return float(sum(min(max(float(r), 0.0), 1.0) if math.isfinite(float(r)) else 0.0 for r in rewards))


def oracle_prior(rate: float) -> tuple[float, float]:
    """The Beta an oracle's rate stands for: strength `ORACLE_STRENGTH`, mean the rate clipped into (0, 1)."""
    m = min(max(float(rate), ORACLE_CLIP), 1.0 - ORACLE_CLIP)
    return m * ORACLE_STRENGTH, (1.0 - m) * ORACLE_STRENGTH


def _zero_stats() -> dict[str, int]:
    return {"visits": 0, "all_correct": 0, "all_wrong": 0}
