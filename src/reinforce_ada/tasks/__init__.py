"""Built-in tasks. Each task module offers a frozen config, `make_split(cfg) -> (train, held_out)` of `Prompt`s and
a verifier `verify(completion, answer) -> float`."""

from __future__ import annotations

from reinforce_ada.tasks import arithmetic

__all__ = ["arithmetic"]
