"""The sampling core: which prompts get how many samples, and what each sample teaches.

Owns: `StrategyConfig` (a name, its strategy's options and a seed), the options every strategy shares (`options`),
building configs from flat names (`configure`), objectives f'(p), advantages, the prompt order, prompt memory (the
pass-rate tracker), the pass-rate `oracle` (behind `estimator=oracle`, fed by its caller), the strategy protocol
(`protocol`), prompt admission (`admission`), the strategies, the budget ledger, and the two drivers that run a
strategy against an engine: `rounds.collect` (synchronous rounds) and `streaming.collect_streaming` (no barrier), and
`over_stream.generate_over_stream` (round mode over any streaming engine, shared by every engine).
May import: `types`, `errors` only -- no torch, no models, no engines; engines plug in through the
drivers' `Engine` / `StreamingEngine` protocols.
"""
