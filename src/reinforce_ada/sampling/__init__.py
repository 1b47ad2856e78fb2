"""The sampling core: which prompts get how many samples, and what each sample teaches.

Owns: `StrategyConfig` (one vocabulary), objectives f'(p), advantages, the prompt order, prompt memory (the
pass-rate tracker), the pass-rate `oracle` (behind `estimator=oracle`, fed by its caller), the strategy protocol
(`protocol`), the strategies, the budget ledger, and the two drivers that run a strategy against an engine:
`rounds.collect` (synchronous rounds) and `streaming.collect_streaming` (no barrier), and
`over_stream.generate_over_stream` (round mode over any streaming engine, shared by every engine).
May import: `types`, `errors` only -- no torch, no models, no engines; engines plug in through the
drivers' `Engine` / `StreamingEngine` protocols.
"""
