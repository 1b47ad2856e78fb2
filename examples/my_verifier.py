"""A verifier of your own: any function `(completion, answer) -> float` in a file, named as FILE:FUNCTION.

    reinforce-ada train ... --task.verifier examples/my_verifier.py:last_number

Rewards must be real numbers (int, float or bool); a raise, a timeout or anything else scores 0 and is counted in
`verifier_errors` (a step where most samples fail stops the run, see `max_verifier_error_share`).
"""

from __future__ import annotations

import re

_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


def last_number(completion: str, answer: str) -> float:
    """1.0 when the last number in the completion equals the reference answer, else 0.0."""
    numbers = _NUMBER.findall(completion.replace(",", ""))
    return float(bool(numbers) and float(numbers[-1]) == float(answer))
