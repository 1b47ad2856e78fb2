"""The prompt memory: what a strategy remembers about each prompt across steps, and where a belief starts.

Owns: `PromptMemory` (`prompt_memory`: visits, streaks, evictions, lengths, and the pass-rate estimate by `estimator`),
built from a strategy's options in one call, `PromptMemory(opts)`; the paper's Ada-EMA tracker (`tracker`); the
priors a belief starts from (`priors`: a pass-rate file, the level's running rate); the learned difficulty predictor
(`predictor`, with its options, which exist while `estimator` is predictor or both); SPO's drift forgetting
(`forgetting`, with its options, which exist while `forgetting = "drift"`); the pass-rate oracle behind
`estimator=oracle` (`oracle`, a benchmark ceiling fed by its caller). `MemoryOptions` (`options`) holds what every
strategy shares, each default written once. The caller provides what the memory cannot compute itself through one
call, `PromptMemory.attach(oracle=..., scorer=...)` (a strategy forwards it: `PoolStrategy.attach`).
May import: `sampling.fields`, `sampling.checks`, `types`, `errors`.
"""

from __future__ import annotations

from reinforce_ada.sampling.memory.forgetting import DriftForgetting, DriftOptions, Scorer, refuse_drift, rho_of
from reinforce_ada.sampling.memory.options import ESTIMATORS, FORGETTING, USES_PREDICTOR, MemoryOptions, resolved_evict
from reinforce_ada.sampling.memory.oracle import PassRateOracle, missing_oracle, refuse_oracle
from reinforce_ada.sampling.memory.predictor import DifficultyPredictor, PredictorOptions
from reinforce_ada.sampling.memory.priors import LevelRates, coverage_note, file_rate, read_prior_file
from reinforce_ada.sampling.memory.prompt_memory import ORACLE_STRENGTH, PromptMemory, oracle_prior
from reinforce_ada.sampling.memory.tracker import PassRateTracker

__all__ = [
    "ESTIMATORS",
    "FORGETTING",
    "ORACLE_STRENGTH",
    "USES_PREDICTOR",
    "DifficultyPredictor",
    "DriftForgetting",
    "DriftOptions",
    "LevelRates",
    "MemoryOptions",
    "PassRateOracle",
    "PassRateTracker",
    "PredictorOptions",
    "PromptMemory",
    "Scorer",
    "coverage_note",
    "file_rate",
    "missing_oracle",
    "oracle_prior",
    "read_prior_file",
    "refuse_drift",
    "refuse_oracle",
    "resolved_evict",
    "rho_of",
]
