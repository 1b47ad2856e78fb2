"""Where a prompt's pass-rate belief starts before its own visits: the tracker's prior (`prompt_memory`).

The prior is a Beta of strength s around a mean m, from the first source that knows the prompt (s =
`prior_strength`, else prior_alpha + prior_beta; SPO's default is the recipe's 8 -- 0.4 used 1 there):
1) `prior_file` (any estimator but oracle): a pass-rate file, e.g. what `reinforce-ada filter` writes (JSONL or CSV
   rows, or a `.json` array of them, with `pass_rate` or `p`, keyed by `id`, else by the `prompt` text; an optional
   `samples` count turns the rate into SPO's smoothed (k + 1/2) / (samples + 1)). Prompts the file lacks fall through
   to the estimator's prior. A prior measured by sampling costs tokens: a study that compares arms charges them (the
   file says nothing of it).
2) the estimator's: `both` (the learned predictor's p), `level` (the running pass rate of the prompt's difficulty
   level, `LevelRates`: free, from the visits of every prompt at that level) or none -- `tracker` uses the flat
   Beta(prior_alpha, prior_beta) itself (m = prior_alpha / s).
`prior_decays` (SPO's rule; off by default, the Ada-EMA / MoPPS rule): the prior becomes the prompt's first counts
(m s, s) and is forgotten with them at `decay` per visit, instead of staying as fixed pseudo-counts beside them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from reinforce_ada.errors import ConfigError
from reinforce_ada.types import Prompt
from reinforce_ada.userfiles import read_rows, share, whole_number

PRIOR_SUFFIXES = (".jsonl", ".json", ".csv")


class LevelRates:
    """Per difficulty level, the decayed counts of correct and drawn samples over every prompt's visits (`level`
    prior); a level's mean is (k + 1) / (n + 2). Prompts without a level share the level None."""

    def __init__(self, decay: float):
        self.decay = decay
        self.counts: dict[str, list[float]] = {}
        """str(level) -> [correct, drawn] (a str key: JSON's)."""

    def add(self, level: Any, correct: int, total: int) -> None:
        c = self.counts.setdefault(str(level), [0.0, 0.0])
        c[0] += correct
        c[1] += total

    def new_step(self) -> None:
        """Forget at `decay` per step (a level is visited many times a step: per visit would forget in one)."""
        for c in self.counts.values():
            c[0] *= self.decay
            c[1] *= self.decay

    def mean(self, level: Any) -> float:
        k, n = self.counts.get(str(level), (0.0, 0.0))
        return (k + 1.0) / (n + 2.0)

    def state_dict(self) -> dict[str, Any]:
        return {"counts": {k: list(v) for k, v in self.counts.items()}}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.counts = {k: [float(v[0]), float(v[1])] for k, v in state["counts"].items()}


def _rate(row: dict[str, Any], path: Path, i: int) -> float:
    key = "pass_rate" if "pass_rate" in row else "p"
    if row.get(key) in (None, ""):
        raise ConfigError(f"{path}: row {i} needs a numeric 'pass_rate' (or 'p') column")
    rate = share(row[key], path, i, key)
    if row.get("samples") in (None, ""):
        return rate
    n = whole_number(row["samples"], path, i, "samples", lo=1)
    return (rate * n + 0.5) / (n + 1)  # SPO's recipe: a smoothed mean, never exactly 0 or 1


def read_prior_file(path: str | Path) -> dict[str, float]:
    """`id` (and `prompt` text) -> prior pass rate (module docstring, 1), read by the one reader of user files
    (`reinforce_ada.userfiles`: encodings, line ends, sizes, types and non-finite numbers as for a data file); two
    rows giving one prompt different rates are an error naming both rows. Errors name the file, the row and the
    value."""
    p = Path(path)
    rows = read_rows(p, what="prior_file", suffixes=PRIOR_SUFFIXES)
    out: dict[str, float] = {}
    first: dict[str, int] = {}
    for i, row in enumerate(rows, start=1):
        keys = [str(row[k]) for k in ("id", "prompt") if row.get(k) not in (None, "")]
        if not keys:
            raise ConfigError(f"{p}: row {i} needs an 'id' or a 'prompt' column to match prompts by")
        rate = _rate(row, p, i)
        for key in keys:
            if key in out and out[key] != rate:
                raise ConfigError(
                    f"{p}: rows {first[key]} and {i} give {key[:60]!r} two pass rates ({out[key]:g} and {rate:g}); "
                    "keep one row per prompt"
                )
            out[key], first[key] = rate, first.get(key, i)
    if not out:
        raise ConfigError(f"prior_file={str(p)!r} holds no rows")
    return out


def coverage_note(rates: dict[str, float] | None, prompts: list[Prompt], path: str | None) -> str | None:
    """How many of `prompts` the prior file knows (by id, then text): None when it knows every one, a note when some,
    a ConfigError when none (the file is for another dataset, or keyed by a column it does not read)."""
    if not rates or not prompts:
        return None
    found = sum(file_rate(rates, p) is not None for p in prompts)
    if found == len(prompts):
        return None
    if found == 0:
        raise ConfigError(
            f"prior_file={path!r}: none of the {len(prompts)} training prompts is in it (it matches a prompt by its "
            f"'id' column, else by its 'prompt' text; e.g. the first training prompt has id {prompts[0].id!r} and "
            f"text {prompts[0].text[:60]!r}, the file holds keys such as {next(iter(rates))[:60]!r})"
        )
    return (
        f"note: prior_file {path} knows {found} of {len(prompts)} training prompts; the other "
        f"{len(prompts) - found} start from the estimator's prior"
    )


def file_rate(rates: dict[str, float] | None, prompt: Prompt) -> float | None:
    """The file's rate for `prompt` (by id, then by text), or None."""
    if not rates:
        return None
    rate = rates.get(prompt.id)
    return rates.get(prompt.text) if rate is None else rate
