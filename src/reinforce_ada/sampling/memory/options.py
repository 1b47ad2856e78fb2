"""The prompt memory's options (`MemoryOptions`, shared by every strategy) and its one list of estimators.

Each default is written here once: the tracker, the level prior and the memory read them from these options
(`PromptMemory(opts)`); the modes that bring options of their own declare them beside their code
(`forgetting=drift`: `forgetting.DriftOptions`; `estimator=predictor|both`: `predictor.PredictorOptions`).
"""

from __future__ import annotations

from dataclasses import dataclass

from reinforce_ada.errors import ConfigError
from reinforce_ada.sampling.checks import at_least, boolean, choice, positive
from reinforce_ada.sampling.fields import option

ESTIMATORS = ("tracker", "predictor", "both", "level", "oracle", "prior")
"""Where a pass-rate estimate comes from (`PromptMemory.posterior`): the one list."""
USES_PREDICTOR = ("predictor", "both")
"""The estimators that read the learned difficulty predictor (and bring its options)."""
FORGETTING = ("fixed", "drift")


@dataclass(frozen=True)
class MemoryOptions:
    """The strategy's prompt memory across steps (`sampling.memory`): the pass-rate tracker and its prior."""

    estimator: str = option(
        "tracker",
        "where a prompt's pass-rate estimate comes from (est allocation, seq give_up, mopps, select=value): tracker "
        "(Beta-prior EMA of its own visits), predictor (learned from prompt features over all prompts) or both (the "
        "predictor is the tracker's prior, strength prior_alpha + prior_beta), level (the running pass rate of the "
        "prompt's difficulty level is that prior) or oracle (the exact pass rate under the current policy, free of "
        "budget: a benchmark ceiling, our trainer on exact-answer tasks and the simulator only), or prior (the "
        "prior's mean alone, never updated by visits: A*-PO's static offline value)",
    )
    prior_file: str | None = option(
        None,
        "a pass-rate file (JSONL, CSV or a JSON array; rows with id or prompt, and pass_rate; e.g. `reinforce-ada "
        "filter --rates`) whose rates are the prior mean of the prompts it lists (strength prior_alpha + prior_beta); "
        "a prior measured by sampling costs tokens a comparison must charge",
        plan=False,  # the planner is given the pass rates; its simulated prompts are in no file
    )
    prior_decays: bool = option(
        False,
        "the prior is the prompt's first counts, forgotten with them at `decay` per visit (SPO's rule), not fixed "
        "pseudo-counts (Ada-EMA, MoPPS)",
    )
    prior_alpha: float = option(1.0, "pass-rate tracker: Beta prior alpha")
    prior_beta: float = option(1.0, "pass-rate tracker: Beta prior beta")
    prior_strength: float | None = option(
        None,
        "pseudo-samples behind an informative prior mean (a prior file's, the level's, the predictor's); none: "
        "prior_alpha + prior_beta (SPO's recipe: 8)",
    )
    decay: float = option(
        0.9, "pass-rate tracker: exponential decay of past counts per visit (lambda in (0, 1])", plan=False
    )
    forgetting: str = option(
        "fixed",
        "how a visit discounts a prompt's counts: fixed (by `decay`) or drift (SPO's KL-adaptive discount from the "
        "policy's drift on the prompt's last response; our trainer and the simulator; brings drift_half, rho_min, "
        "rho_max)",
        plan=False,
    )
    forget: float = option(
        1.0,
        "prompt memory: a prompt's counts are read discounted by forget^(steps since its last visit), so an old "
        "belief widens back toward the prior as the policy moves on (1 = off, every paper's rule; ours, for "
        "select=value and mopps on pools visited rarely)",
        plan=False,
    )
    evict: float | None = option(
        None,
        "skip in every later step a prompt whose pass rate on a visit was >= evict (pilot_commit's default 1.0; "
        "off for the others; a value > 1 turns it off)",
        plan=False,
    )

    history: int = option(
        16, "recent rewards remembered per prompt (knapsack's p_hat, paper 16); an estimate needs half", plan=False
    )

    def check_memory(self) -> None:
        if self.evict is not None and not self.evict > 0:
            raise ConfigError(f"evict={self.evict} is out of range; it must be > 0 (a value > 1 turns eviction off)")
        choice("estimator", self.estimator, ESTIMATORS)
        positive("prior_alpha", self.prior_alpha)
        positive("prior_beta", self.prior_beta)
        if not self.prior_alpha + self.prior_beta < float("inf"):  # each finite, the sum overflows: p_hat is nan
            raise ConfigError(
                f"prior_alpha={self.prior_alpha}, prior_beta={self.prior_beta}: their sum (the prior's strength) "
                "overflows to infinity; give a strength below 1e308 (the recipe's is 8)"
            )
        if self.prior_strength is not None and not 0.0 < self.prior_strength < 1e300:
            raise ConfigError(f"prior_strength={self.prior_strength} is out of range; it must be > 0 (or none)")
        if not 0.0 < self.decay <= 1.0:
            raise ConfigError(f"decay={self.decay} is out of range; it must be in (0, 1]")
        if not 0.0 < self.forget <= 1.0:
            raise ConfigError(f"forget={self.forget} is out of range; it must be in (0, 1] (1 = off)")
        at_least("history", self.history, 2)
        boolean("prior_decays", self.prior_decays)
        choice("forgetting", self.forgetting, FORGETTING)
        if self.prior_file is not None and (not isinstance(self.prior_file, str) or not self.prior_file.strip()):
            raise ConfigError(f"prior_file={self.prior_file!r} must be a path to a pass-rate file, or none")
        if self.prior_file is not None and self.estimator == "oracle":
            raise ConfigError("prior_file does not apply to estimator='oracle' (the exact rate needs no prior)")


def resolved_evict(opts: MemoryOptions) -> float | None:
    """The eviction threshold in force, or None when eviction is off (`evict` None or > 1)."""
    return opts.evict if opts.evict is not None and opts.evict <= 1.0 else None
