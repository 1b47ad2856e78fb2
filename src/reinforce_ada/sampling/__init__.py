"""The sampling core: which prompts get how many samples, and what each sample teaches.

Owns: `StrategyConfig` (a name, its strategy's options and a seed), how an option is declared (`fields`), the options
every strategy shares and the features that bring options of their own (`options`: `select=NAME`, `forgetting=drift`,
`estimator=predictor|both`), building configs from flat names (`configure`), objectives f'(p), advantages, the prompt
order, the planner's exact law of a visit and the value table (`law`), the prompt memory (`memory/`: the pass-rate
tracker, priors, predictor, drift forgetting and the oracle), the strategy protocol (`protocol`), prompt admission
(`admission/`: one file per rule), the strategies (`strategies/`: one file each), the budget ledger, and the two
drivers that run a strategy against an engine: `rounds.collect` (synchronous rounds) and `streaming.collect_streaming`
(no barrier), and `over_stream.generate_over_stream` (round mode over any streaming engine, shared by every engine).
May import: the root modules only (`types`, `errors`, `userfiles`, ...) -- no torch, no models, no engines; engines
plug in through the drivers' `Engine` / `StreamingEngine` protocols.
"""

from __future__ import annotations

# The admission rules' own options join the vocabulary when the rules are registered (`options.FEATURES`): importing
# any part of the sampling core registers them, so `options.make_options(Options, select="iw", iw_mix=0.3)` works alone.
import reinforce_ada.sampling.admission.registry  # noqa: F401
