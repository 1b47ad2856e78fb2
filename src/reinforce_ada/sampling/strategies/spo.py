"""SPO, Single-stream Policy Optimization (arXiv 2509.13232, ICLR 2026; the authors' verl recipe `verl-recipe/spo`).

1) One sample per prompt (`n = 1`; any n is allowed: the samples of a prompt share its baseline).
2) The baseline is a persistent per-prompt value tracker (`advantage = "tracker"`): A = r - v_hat, v_hat the
   prompt's estimate from before this step's sample (`sampling.memory`, a discounted Beta: `prior_decays`, SPO's
   rule, with forgetting `decay` per visit), so the baseline does not depend on the sample it scores.
3) Advantages are normalised over the whole batch (`batch_normalize = "samples"`, the recipe's (A - mean) / std).
4) Prompts are drawn by priority sqrt(v_hat (1 - v_hat)) + 0.05 (`select = "priority"`, `sampling.admission`).
Departures from the paper and the recipe, each an option where the choice is real:
- Forgetting is a constant `decay` by default (0.9: a window of about 10 visits inside the recipe's band of 8 to 25; the
  research note's cheapest drop-in). The paper's KL-adaptive rho = 2^(-D/D_half) clipped to [0.875, 0.96] is
  `forgetting=drift` (`sampling.memory.forgetting`: one extra forward pass over the step's prompts' last responses, our
  trainer and the simulator only; the recipe spends two).
- The prior: uninformative Beta(1/2, 1/2) (the recipe's alpha = beta = 0.5 without offline values) unless a pass-rate
  file (`prior_file`, e.g. `reinforce-ada filter`'s output: the paper's 8-sample offline pass, whose tokens a
  comparison must charge), the level (`estimator=level`) or the learned predictor (`estimator=both`) gives its mean,
  at strength `prior_strength` = 8, the recipe's N_init = 1 / (1 - rho_min) (0.4 used alpha + beta = 1). The recipe
  smooths an offline mean to (k + 1/2) / (n0 + 1); `prior_file` rows with a `samples` column get the same smoothing.
- Draws come from `candidates` x batch candidates the prompt source offers, not the whole set (`admission.priority`).
- Batch normalisation counts each sample once (the recipe); `batch_normalize=tokens` weighs them by length (SPO++).
- The loss is the trainer's (PPO-clip with clip-higher and dual clip, token-mean: the recipe's settings).
Integrations: our trainer and the verl plugin take any n; TRL's GRPOConfig refuses num_generations < 2, so SPO runs
inside TRL with n >= 2 only.
"""

from __future__ import annotations

from dataclasses import dataclass

from reinforce_ada.sampling.options import Options, same_as
from reinforce_ada.sampling.strategies.uniform import Uniform, UniformOptions


@dataclass(frozen=True)
class SpoOptions(UniformOptions):
    """SPO's defaults (module docstring)."""

    n: int = same_as(Options, "n", 1)
    advantage: str = same_as(Options, "advantage", "tracker")
    scale_std: bool = same_as(Options, "scale_std", False)
    batch_normalize: str = same_as(Options, "batch_normalize", "samples")
    select: str = same_as(Options, "select", "priority")
    prior_alpha: float = same_as(Options, "prior_alpha", 0.5)
    prior_beta: float = same_as(Options, "prior_beta", 0.5)
    prior_decays: bool = same_as(Options, "prior_decays", True)
    prior_strength: float | None = same_as(Options, "prior_strength", 8.0)


class Spo(Uniform):
    Options = SpoOptions
