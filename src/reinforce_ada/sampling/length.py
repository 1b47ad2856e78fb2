"""Length levers: a per-sample cap on a completion, absolute or relative to the prompt's own correct answers.

Where answers are long and their length varies, which samples are drawn decides the bill as much as how many, and
wrong answers tend to be the long ones. `length_cap` (a switch; each value brings its options, `sampling.options`):
1) `absolute`: every sample of every prompt stops at `cap_tokens` tokens;
2) `relative`: a prompt's samples stop at `cap_ratio` times the running mean length of its correct answers (the
   prompt memory's `correct_tokens`), never below `cap_floor`; a prompt without a correct answer of its own is not
   capped. (A cap borrowed from other prompts' answers -- their mean, or even their longest -- can sit below every
   right answer of a prompt longer than any solved so far: capped, it can never be right, so it never earns a cap
   of its own. Measured on the long-answer testbed, where lengths vary tenfold between prompts.)
3) A cap is decided when the prompt joins the step, from the memory alone, and travels with each request
   (`Request.max_tokens`): the engine stops decoding there, so a cut sample costs only its tokens up to the cap.
4) A capped sample (it reached its cap: finish_reason "length" at the cap) is scored as wrong: its reward is 0
   whatever the verifier said of the cut text. The loss trains on it as any wrong sample -- its tokens up to the
   cap, with the advantage its baseline gives a reward of 0 -- so it pushes down answers that run long. A
   completion cut by the engine's own `max_new_tokens` is not a capped sample (the verifier's score stands, as
   before).
Sources and departures: per-prompt length budgets learned from the prompt's correct answers follow the
length-control levers of the peers (DUET, verl #658's per-prompt `max_tokens` scheduler; issue notes); DUET controls
length with a training signal as well as a budget, and the verl scheduler lowers the budget from observed lengths
of all answers -- here only the budget, from correct answers only, and a cut answer is wrong (DAPO's overlong
filtering masks such samples instead; masking them would not push long answers down). Our trainer, the simulator
and every engine of the package honour it; the TRL and verl integrations refuse it (their engines take one cap).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from reinforce_ada.errors import ConfigError
from reinforce_ada.sampling.checks import at_least
from reinforce_ada.sampling.fields import FeatureOptions, option
from reinforce_ada.types import Prompt, Sample

LENGTH_CAPS = ("none", "absolute", "relative")


@dataclass(frozen=True)
class AbsoluteCapOptions(FeatureOptions):
    cap_tokens: int = option(256, "length_cap=absolute: every sample stops at this many tokens and is then wrong")

    def check(self) -> None:
        at_least("cap_tokens", self.cap_tokens, 1)


@dataclass(frozen=True)
class RelativeCapOptions(FeatureOptions):
    cap_ratio: float = option(
        2.0, "length_cap=relative: a sample stops at this times the prompt's running mean correct length"
    )
    cap_floor: int = option(16, "length_cap=relative: the cap never goes below this many tokens")

    def check(self) -> None:
        if not (isinstance(self.cap_ratio, int | float) and math.isfinite(self.cap_ratio) and self.cap_ratio >= 1.0):
            raise ConfigError(
                f"cap_ratio={self.cap_ratio!r} is out of range; it must be a finite number >= 1 (a correct answer "
                "of average length must fit)"
            )
        at_least("cap_floor", self.cap_floor, 1)


def cap_for(opts: Any, memory: Any, prompt: Prompt) -> int | None:
    """The prompt's cap this step (module docstring), or None for no cap of its own."""
    mode = opts.length_cap
    if mode == "absolute":
        return int(opts.cap_tokens)
    if mode != "relative":
        return None
    own = memory.correct_tokens.get(prompt.id)
    if own is None:  # no correct answer of its own: no cap (module docstring, 2)
        return None
    return max(int(opts.cap_floor), math.ceil(opts.cap_ratio * own))


def capped(sample: Sample, cap: int | None) -> bool:
    """The sample reached its own cap (module docstring, 4)."""
    n = sample.num_tokens or len(sample.token_ids)
    return cap is not None and sample.finish_reason == "length" and n >= cap


def refuse_length_cap(length_cap: str, where: str, option: str = "length_cap") -> None:
    """An integration whose engine takes one cap for every sample refuses a per-sample cap at start."""
    if length_cap != "none":
        raise ConfigError(
            f"{option}={length_cap!r} is not supported by {where}: a per-sample cap needs an engine that takes one "
            "per request (reinforce-ada's own trainer and engines, and the simulator); set its max completion length "
            f"instead, or {option}=none"
        )
