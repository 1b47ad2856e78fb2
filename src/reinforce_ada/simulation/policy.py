"""A simulated policy: an engine whose prompts have true pass rates that move under policy-gradient updates.

Each prompt x has a logit theta_x = logit(p0_x) + b_x + phi_x . w, with a per-prompt bias b_x and shared random
features phi_x (so learning on one prompt transfers to similar ones). A sample is correct with probability
p_x = sigmoid(theta_x); its reward is 1 or 0. `update` applies the exact policy gradient of the training surrogate
sum_x weight_x * sum_j A_j * log pi(y_j | x) / (samples trained) -- d log pi(y)/d theta = y - p -- averaged like a
token-mean loss, so groups with zero advantage dilute the step exactly as they do in a real trainer.
It runs a strategy end to end in milliseconds: the planner, `simulate` and the statistical tests use it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from reinforce_ada.errors import ConfigError
from reinforce_ada.sampling.memory import PassRateOracle
from reinforce_ada.types import Group, Prompt, Request, Sample


@dataclass(frozen=True)
class SimConfig:
    """How the simulated policy learns and what it reports (module docstring)."""

    lr: float = 0.3
    """Step size on the logits (0 freezes the policy)."""
    optimizer: str = "normalized"
    """`normalized`: the step is rescaled to RMS `lr` over the trained prompts, as Adam makes a real trainer's step
    size roughly independent of the gradient's scale (so advantage scaling cannot masquerade as a better
    estimator); `sgd`: plain gradient ascent on the surrogate."""
    features: int = 8
    """Dimension of the shared features."""
    feature_scale: float = 1.0
    """Scale of the shared features: 0 makes prompts learn independently."""
    mean_tokens: float = 200.0
    """Mean completion length (Poisson) reported as tokens."""
    seed: int = 0

    def __post_init__(self) -> None:
        """A NaN or infinite step would turn every pass rate into NaN without an error."""
        for name in ("lr", "feature_scale", "mean_tokens"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value >= 0):
                raise ConfigError(f"SimConfig.{name} must be a finite number >= 0, got {value}")
        if self.features < 1:
            raise ConfigError(f"SimConfig.features must be >= 1, got {self.features}")


def _logit(p: np.ndarray) -> np.ndarray:
    p = np.clip(p, 1e-6, 1 - 1e-6)
    return np.log(p) - np.log1p(-p)


class SimulatedPolicy:
    """An engine over `prompts` with true pass rates `pass_rates` that move under `update` (module docstring).

    `generate(requests)` draws 0/1 rewards from each prompt's current pass rate; `update(groups, advantages, weights)`
    applies the exact policy gradient of a step's training surrogate; `pass_rates` and `oracle()` give the truth a
    real policy hides. Build a pool shaped like the paper's hard set with `hard_pool(n)`.
    """

    def __init__(self, prompts: Sequence[Prompt], pass_rates: Sequence[float], cfg: SimConfig | None = None):
        self.cfg = cfg or SimConfig()
        if self.cfg.optimizer not in ("normalized", "sgd"):
            raise ValueError(f"optimizer={self.cfg.optimizer!r}; choose one of ['normalized', 'sgd']")
        rates = np.asarray(pass_rates, dtype=float)
        if len(rates) != len(prompts):
            raise ValueError(f"{len(prompts)} prompts but {len(rates)} pass rates")
        bad = np.flatnonzero(~((rates >= 0) & (rates <= 1)))
        if len(bad):
            raise ValueError(f"pass rate {rates[bad[0]]} of prompt {prompts[bad[0]].id!r} is outside [0, 1]")
        self.index = {p.id: i for i, p in enumerate(prompts)}
        rng = np.random.default_rng(self.cfg.seed)
        self.theta0 = _logit(rates)
        self.phi = (
            rng.normal(size=(len(rates), self.cfg.features)) * self.cfg.feature_scale / np.sqrt(self.cfg.features)
        )
        self.bias = np.zeros(len(rates))
        self.w = np.zeros(self.cfg.features)
        self.rng = np.random.default_rng(self.cfg.seed + 1)
        # exact 0 / 1 pass rates stay exact (logit clipping would otherwise leak 1e-6)
        self.frozen_lo, self.frozen_hi = rates <= 0.0, rates >= 1.0

    def pass_rates(self) -> np.ndarray:
        p = 1.0 / (1.0 + np.exp(-(self.theta0 + self.bias + self.phi @ self.w)))
        return np.where(self.frozen_lo, 0.0, np.where(self.frozen_hi, 1.0, p))

    def oracle(self) -> PassRateOracle:
        """The policy's true current pass rates as a pass-rate oracle (`estimator=oracle`); invalidate it after
        every `update`."""
        return PassRateOracle(lambda prompts: self.pass_rates()[[self._idx(p.id) for p in prompts]])

    def _idx(self, prompt_id: str) -> int:
        if prompt_id not in self.index:
            raise KeyError(f"prompt {prompt_id!r} is not in the simulated pool")
        return self.index[prompt_id]

    def generate(self, requests: Sequence[Request]) -> list[Sample]:
        p_all = self.pass_rates()
        out = []
        for r in requests:
            p = p_all[self._idx(r.prompt.id)]
            ys = self.rng.random(r.k) < p
            lens = 1 + self.rng.poisson(self.cfg.mean_tokens, r.k)
            if r.max_tokens is not None:  # the request's cap (a length lever): a longer answer is cut, wrong
                cut = lens > r.max_tokens
                ys, lens = ys & ~cut, np.minimum(lens, r.max_tokens)
            logp = {True: float(np.log(max(p, 1e-12))), False: float(np.log(max(1.0 - p, 1e-12)))}
            out += [  # one "token", the outcome, with its log-prob: what forgetting="drift" scores later
                Sample(
                    r.prompt.id,
                    text=str(int(y)),
                    token_ids=[int(y)],
                    logprobs=[logp[bool(y)]],
                    num_tokens=int(n),
                    finish_reason="length" if r.max_tokens is not None and n >= r.max_tokens else "eos",
                    reward=float(y),
                    index=j,
                )
                for j, (y, n) in enumerate(zip(ys, lens, strict=True))
            ]
        return out

    def scorer(self) -> Any:
        """The policy's log-probs of earlier one-token responses (`sampling.memory.Scorer`): log p or log(1 - p)
        under the current pass rates."""

        def score(prompts: Sequence[Prompt], completions: Sequence[Sequence[int]]) -> list[list[float]]:
            p_all = self.pass_rates()
            out = []
            for pr, ys in zip(prompts, completions, strict=True):
                p = float(p_all[self._idx(pr.id)])
                out.append([float(np.log(max(p if y else 1.0 - p, 1e-12))) for y in ys])
            return out

        return score

    def update(self, groups: Sequence[Group], advantages: Sequence[np.ndarray], weights: np.ndarray) -> None:
        n_trained = sum(len(g.samples) for g in groups)
        if n_trained == 0 or self.cfg.lr == 0:
            return
        p_all = self.pass_rates()
        grad_theta = np.zeros_like(self.bias)
        for g, adv, wt in zip(groups, advantages, weights, strict=True):
            i = self._idx(g.prompt.id)
            y = np.array([1.0 if s.reward and s.reward > 0.5 else 0.0 for s in g.samples])
            grad_theta[i] += wt * float(np.sum(adv * (y - p_all[i])))
        grad_theta *= len(groups) / n_trained
        if self.cfg.optimizer == "normalized":
            touched = [self._idx(g.prompt.id) for g in groups]
            rms = float(np.sqrt(np.mean(grad_theta[touched] ** 2)))
            if rms == 0.0:
                return
            grad_theta /= rms
        self.bias += self.cfg.lr * grad_theta
        self.w += self.cfg.lr * self.phi.T @ grad_theta / max(1, len(groups))

    def prompt_features(self, prompt_id: str) -> list[float]:
        """The prompt's shared features phi_x: the simulated analogue of the policy's prompt hidden state (what
        learning on one prompt moves the others along); they carry no information about its initial pass rate."""
        return self.phi[self._idx(prompt_id)].tolist()

    def streaming(self, slots: int, latency: Any = None, seed: int = 0) -> Any:
        """This policy as a streaming engine with `slots` decode slots and a simulated clock
        (`simulation.stream.SimulatedStream`; `latency` is a `simulation.stream.Latency`)."""
        from reinforce_ada.simulation.stream import SimulatedStream

        return SimulatedStream(self, slots, latency, seed)

    def state_dict(self) -> dict[str, Any]:
        return {"bias": self.bias.tolist(), "w": self.w.tolist(), "rng": self.rng.bit_generator.state}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.bias, self.w = np.array(state["bias"]), np.array(state["w"])
        self.rng.bit_generator.state = state["rng"]


def hard_pool(size: int, seed: int = 0) -> tuple[list[Prompt], np.ndarray]:
    """A pool shaped like the paper's hard set (v3 Table 5 buckets by base pass@16):
    19.7% extremely hard (p in [0.002, 0.02]), 61.7% hard ([0.03, 0.15]), 17.4% medium ([0.2, 0.45]),
    1.2% easy ([0.5, 0.9]) -- most pass rates below 0.2."""
    if size < 1:
        raise ValueError(f"pool size must be >= 1, got {size}")
    rng = np.random.default_rng(seed)
    buckets = [(0.197, 0.002, 0.02), (0.617, 0.03, 0.15), (0.174, 0.2, 0.45), (0.012, 0.5, 0.9)]
    which = rng.choice(len(buckets), size=size, p=[b[0] for b in buckets])
    rates = np.array([rng.uniform(buckets[k][1], buckets[k][2]) for k in which])
    prompts = [Prompt(id=f"sim-{i:05d}", text=f"simulated prompt {i}", level=int(k)) for i, k in enumerate(which)]
    return prompts, rates
