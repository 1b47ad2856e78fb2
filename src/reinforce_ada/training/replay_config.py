"""`[replay]`: replay of earlier correct answers (`training.replay`, docs/replay.md), a training setting of any
strategy. Its own module so that `training.config` stays in its line budget; `training.config` re-exports it."""

from __future__ import annotations

import math
from dataclasses import dataclass

from reinforce_ada.errors import ConfigError
from reinforce_ada.sampling.options import option

CORRECTIONS = ("sequence", "token")
"""How a replayed answer's loss is importance-weighted (`training.replay`, 3)."""
MODES = ("answers", "samples")
"""What is replayed: answers (AR3PO: an earlier correct answer into an all-wrong group, `training.replay`) or samples
(experience replay: every trained group again in the next `max_age` steps, `training.experience`)."""


@dataclass(frozen=True)
class ReplayConfig:
    enabled: bool = option(
        False,
        "Replay (AR3PO's response reuse, our trainer only): a trained group with no correct sample gets the "
        "prompt's most recent earlier correct completion in place of one wrong sample, off-policy corrected "
        "(training.replay, docs/replay.md).",
    )
    mode: str = option(
        "answers",
        "answers: AR3PO's reuse of an earlier correct answer in an all-wrong group (training.replay); samples: "
        "experience replay, each step's trained groups trained again in the next max_age steps "
        "(training.experience; needs max_age).",
    )
    max_age: int | None = option(
        None,
        "Use a stored answer or group only if generated at most this many steps ago (None: no limit; mode=samples "
        "needs a limit, the staleness cap).",
    )
    clip: float = option(2.0, "Truncate the replayed answer's importance weight pi_old / pi_behaviour at this (>= 1).")
    correction: str = option(
        "sequence",
        "sequence: every token of a replayed answer weighted by min(prod_t pi_old / pi_behaviour, clip), the ratio "
        "of the whole answer (the default: it estimates the current policy's gradient, the per-token ratio does "
        "not); token: each token by its own truncated ratio (lower variance on long answers, but the prefix stays "
        "the behaviour's).",
    )

    def __post_init__(self) -> None:
        if not isinstance(self.enabled, bool):
            raise ConfigError(f"replay.enabled={self.enabled!r} must be true or false")
        age = self.max_age
        if age is not None and (isinstance(age, bool) or not isinstance(age, int) or age < 1):
            raise ConfigError(
                f"replay.max_age={age!r} must be a whole number of steps >= 1 (a stored answer is at least one step "
                "old when it is replayed), or none for no age limit"
            )
        clip = self.clip
        if isinstance(clip, bool) or not isinstance(clip, int | float) or not (math.isfinite(clip) and clip >= 1.0):
            raise ConfigError(
                f"replay.clip={clip!r} must be a finite number >= 1 (the cap of the truncated importance weight "
                "pi_old / pi_behaviour, pi_old the learner before the update; 2 is the usual truncated-IS cap)"
            )
        if self.mode not in MODES:
            raise ConfigError(f"replay.mode={self.mode!r} must be one of {list(MODES)}")
        if self.mode == "samples" and self.max_age is None:
            raise ConfigError(
                "replay.mode='samples' needs replay.max_age, the staleness cap (steps a group is trained again: 1 "
                "trains each group in its own step and the next)"
            )
        if self.correction not in CORRECTIONS:
            raise ConfigError(
                f"replay.correction={self.correction!r} must be one of {list(CORRECTIONS)} (sequence: the whole "
                "answer's truncated ratio, the default; token: each token's own)"
            )


REPLAY_MOVED = {"replay": "enabled", "replay_max_age": "max_age", "replay_clip": "clip"}
"""0.3's `[strategy]` replay keys -> their `[replay]` names (replay is a training setting, any strategy)."""
