"""A learned difficulty predictor: p_hat(prompt) from prompt features, trained online on observed pass counts.

Why: Ada-Est's tracker estimates a prompt only from its own visits, and a prompt is visited about twice in a run, so
its Beta(1, 1) prior (p_hat = 0.5) sets most allocations. A predictor shares what it learns across prompts.
1) Features x(prompt): a bias; signed hashed character trigrams of `Prompt.text` (`dim` buckets, scaled to unit
   norm); a `level=<k>` token when the task defines levels; and `Prompt.meta["features"]`, a numeric vector (a prompt
   file or task may carry one, e.g. the policy's prompt hidden state from `models.features`; the simulated pool can
   put a difficulty probe there; the trainer does not fill it).
2) Model: p_hat = sigmoid(w . x), clipped to [1e-3, 1 - 1e-3].
3) Update per visit with k correct of n: one damped Fisher-scoring (Newton) step along x,
   w += lr * x * (k - n p) / ((n p (1 - p) + 1) * |x|^2): the visited prompt's logit moves by lr times a bounded
   Newton step toward k/n, and prompts that share features move with it. Constant `lr`, so the predictor keeps
   tracking a policy whose pass rates drift.
No torch: numpy only. Hashing uses crc32, so features are the same in every process and across restarts.
Departure: the paper's Ada-Est mentions a value network V(x) but gives no design; this is our choice.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from typing import Any

import numpy as np

from reinforce_ada.sampling.checks import at_least, fits_memory, positive
from reinforce_ada.sampling.fields import FeatureOptions, option
from reinforce_ada.types import Prompt


@dataclass(frozen=True)
class PredictorOptions(FeatureOptions):
    """The predictor's options: they exist while `estimator` is predictor or both."""

    predictor_lr: float = option(
        0.2, "difficulty predictor: step size of its damped Fisher-scoring update per visit", plan=False
    )
    predictor_dim: int = option(
        4096, "difficulty predictor: hashed character-trigram buckets of the prompt text (0: none)", plan=False
    )

    def check(self) -> None:
        positive("predictor_lr", self.predictor_lr)
        at_least("predictor_dim", self.predictor_dim, 0)
        fits_memory("predictor_dim", self.predictor_dim, 32, "the difficulty predictor's weights and state")


class DifficultyPredictor:
    def __init__(self, *, dim: int = PredictorOptions.predictor_dim, lr: float = PredictorOptions.predictor_lr):
        if dim < 0 or not lr > 0:
            raise ValueError(f"predictor needs dim >= 0 and lr > 0, got dim={dim}, lr={lr}")
        self.dim, self.lr = dim, lr
        self.w = np.zeros(1 + dim)
        """Index 0: the bias; 1..dim: hashed buckets (text trigrams and the level token share them)."""
        self.w_dense: np.ndarray | None = None
        """Weights of `meta["features"]`, sized at the first prompt that has them."""
        self.visits = 0

    @classmethod
    def from_options(cls, opts: Any) -> DifficultyPredictor:
        return cls(dim=opts.predictor_dim, lr=opts.predictor_lr)

    # -- features ---------------------------------------------------------------------------------------------------
    def _sparse(self, prompt: Prompt) -> tuple[np.ndarray, np.ndarray]:
        idx, val = [0], [1.0]
        if self.dim:
            text = prompt.text.encode("utf-8", "replace")
            buckets: dict[int, float] = {}
            for i in range(max(0, len(text) - 2)):
                h = zlib.crc32(text[i : i + 3])
                b = 1 + h % self.dim
                buckets[b] = buckets.get(b, 0.0) + (1.0 if (h >> 31) & 1 else -1.0)
            norm = float(np.sqrt(sum(v * v for v in buckets.values())))
            if norm > 0:
                idx += list(buckets)
                val += [v / norm for v in buckets.values()]
            if prompt.level is not None:
                h = zlib.crc32(f"\x00level={prompt.level}".encode())
                idx.append(1 + h % self.dim)
                val.append(1.0)
        return np.array(idx, dtype=int), np.array(val, dtype=float)

    def _dense(self, prompt: Prompt) -> np.ndarray | None:
        raw = prompt.meta.get("features") if prompt.meta else None
        if raw is None:
            return None
        x = np.asarray(raw, dtype=float).ravel()
        if not np.all(np.isfinite(x)):
            raise ValueError(f"prompt {prompt.id!r}: meta['features'] has non-finite values")
        if self.w_dense is None:
            self.w_dense = np.zeros(len(x))
        elif len(x) != len(self.w_dense):
            raise ValueError(
                f"prompt {prompt.id!r}: meta['features'] has {len(x)} values, earlier prompts had {len(self.w_dense)}"
            )
        return x

    def _logit(self, idx: np.ndarray, val: np.ndarray, dense: np.ndarray | None) -> float:
        z = float(np.dot(self.w[idx], val))
        if dense is not None and self.w_dense is not None:
            z += float(np.dot(self.w_dense, dense))
        return z

    # -- the model --------------------------------------------------------------------------------------------------
    def predict(self, prompt: Prompt) -> float:
        idx, val = self._sparse(prompt)
        z = self._logit(idx, val, self._dense(prompt))
        return float(np.clip(1.0 / (1.0 + np.exp(-np.clip(z, -30, 30))), 1e-3, 1 - 1e-3))

    def update(self, prompt: Prompt, correct: int, total: int) -> None:
        if not 0 <= correct <= total or total == 0:
            raise ValueError(f"prompt {prompt.id!r}: correct={correct} must be in [0, total={total}], total > 0")
        idx, val = self._sparse(prompt)
        dense = self._dense(prompt)
        z = self._logit(idx, val, dense)
        p = 1.0 / (1.0 + np.exp(-np.clip(z, -30, 30)))
        sq = float(np.dot(val, val)) + (float(np.dot(dense, dense)) if dense is not None else 0.0)
        step = self.lr * (correct - total * p) / ((total * p * (1 - p) + 1.0) * sq)
        np.add.at(self.w, idx, step * val)  # a bucket can appear twice (level token and a trigram)
        if dense is not None and self.w_dense is not None:
            self.w_dense += step * dense
        self.visits += 1

    # -- checkpointing ----------------------------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        nz = np.flatnonzero(self.w)
        return {
            "dim": self.dim,
            "w": {str(int(i)): float(self.w[i]) for i in nz},
            "w_dense": None if self.w_dense is None else self.w_dense.tolist(),
            "visits": self.visits,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Every value checked before anything is replaced (a damaged or hand-edited state fails here, naming the
        key, not mid-step: a text `visits` used to)."""
        if state["dim"] != self.dim:
            raise ValueError(f"predictor state has dim={state['dim']}, this predictor has dim={self.dim}")
        visits = state["visits"]
        if isinstance(visits, bool) or not isinstance(visits, int) or visits < 0:
            raise ValueError(f"predictor state: visits={visits!r} must be a whole number >= 0")
        w = np.zeros(1 + self.dim)
        for i, v in state["w"].items():
            k = int(i) if isinstance(i, str) and i.isdigit() else -1
            if not 0 <= k <= self.dim or isinstance(v, bool) or not isinstance(v, int | float) or not np.isfinite(v):
                raise ValueError(
                    f"predictor state: weight {i!r} = {v!r} must be a finite number at an index in [0, {self.dim}]"
                )
            w[k] = v
        dense = None if state["w_dense"] is None else np.array(state["w_dense"], dtype=float)
        if dense is not None and (dense.ndim != 1 or not np.all(np.isfinite(dense))):
            raise ValueError("predictor state: w_dense must be a list of finite numbers")
        self.w, self.w_dense, self.visits = w, dense, visits
