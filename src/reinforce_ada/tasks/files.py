"""Prompt datasets from JSONL, CSV or Parquet files or a saved `datasets` folder, with column mapping.

The file is read by the one reader of user files (`reinforce_ada.userfiles`: sizes, encodings, line ends, CSV and
JSON rules, shared with prior and features files); this module holds the rules of a prompt row.

Each row needs a prompt and an answer (keys configurable). Ids come from an `id` column when present, else
`<file stem>-<row>`. Parquet needs pyarrow (or pandas with a Parquet engine) and a folder written by
`Dataset.save_to_disk` needs `datasets`; both are imported only for those inputs.

Nothing is coerced silently: a value that is not what its column needs is a ConfigError naming the file, the row
(1-based; for JSONL the line), the column and what would be valid. The rules:
1) the prompt is non-empty text of at most `max_prompt_chars` characters (default `MAX_PROMPT_CHARS`);
2) the answer (and an `id`) is non-empty text or a finite number; a number becomes text the way the `exact`
   verifier compares it: integral values without ".0" (`4.0` -> "4"), others as Python prints them (`0.25`).
   Booleans, NaN, infinities, lists and dicts are refused, not turned into "True", "nan" or a repr;
3) the level is empty or a whole number: an int, an integral float (`2.0`), a numeric string or MATH's "Level 3";
   `2.7`, "Level ?" or `true` are refused (pass `level_key=None` to ignore the column);
4) files are UTF-8 (a byte-order mark is allowed); invalid bytes are an error naming the line. A CSV row with more
   fields than the header is an error; CSV fields have no length limit of their own (the `csv` module's default of
   131,072 characters is lifted while reading: the file is already in memory, and rule 1 bounds the prompt);
5) a JSONL line nested too deeply for Python's parser, and a Parquet file that does not read, are errors naming
   the file (and line); so is text holding a lone surrogate (a JSON `"\\ud800"` escape of half a UTF-16 pair),
   which no UTF-8 writer or tokenizer accepts;
6) exact duplicates (the same prompt, answer and level on several rows) are kept, with one warning that counts
   them and names the first rows (a prompt repeated with another answer gets a warning of its own):
   `evaluation.datasets` pairs each prompt with its file row (`filter` writes the rows back), so dropping rows here
   would break that pairing, and whether a repeated question is a mistake is the data owner's call. Repeated ids
   remain an error;
7) the path is a regular file (or a `datasets` folder): a FIFO, socket or device is refused before it is opened,
   since reading one can block forever or never end; so is a file too big for the memory this process
   can get (`MEMORY_PER_BYTE`) and a text file holding NUL bytes (binary, or sparse);
8) a `features` column (`features_key`; None ignores it, as an empty `task.features_key` does), where present, is a
   non-empty list of finite numbers (in a CSV: a JSON array, `"[0.1, -2]"`), the same length on every row that has
   one; it becomes `Prompt.meta["features"]`, which the learned difficulty predictor reads (`sampling.memory.predictor`;
   `reinforce-ada features` writes the policy's own view of each prompt there). An empty cell means no features for
   that row. A value beyond +-`MAX_FEATURE` is refused (it would freeze the predictor), and a key other than the
   default `features` that no row has is an error naming the file's columns (a typo was silently ignored);
9) a repeated id is an error naming both rows, found in one pass (linear in the rows); JSONL lines end at "\n" only
   (a raw U+2028 or U+0085 inside a string is valid JSON).
"""

from __future__ import annotations

import json
import math
import numbers
import re
import warnings
from decimal import Decimal
from pathlib import Path
from typing import Any

from reinforce_ada.errors import ConfigError
from reinforce_ada.types import Prompt
from reinforce_ada.userfiles import MEMORY_PER_BYTE, check_size, read_rows  # noqa: F401 -- the one reader

MAX_PROMPT_CHARS = 32_000
"""Default longest prompt, in characters; a longer one is an error naming its row (`max_prompt_chars` changes it)."""
FEATURES_KEY = "features"
"""The default features column: a file without it simply has no features; any other name must be a column."""
MAX_FEATURE = 1e6
"""Largest |value| of a feature (rule 8). Standardised features are about 1; at 1e300 the predictor's |x|^2 is inf
and its every step 0. A million leaves room for raw, unscaled values."""
_LEVEL = re.compile(r"(?:level\s*)?(-?\d+)", re.IGNORECASE)


def _check_encodable(text: str, where: str) -> str:
    """The text itself, unless it holds a lone surrogate (rule 5): one no UTF-8 writer or tokenizer accepts."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as e:
        raise ConfigError(
            f"{where} holds a lone surrogate {text[e.start]!r} at character {e.start + 1} (half of a UTF-16 pair, "
            "e.g. a JSON \\ud800 escape); it cannot be written as UTF-8: fix or drop the row"
        ) from None
    return text


def _as_text(value: Any, where: str) -> str:
    """A non-empty text or finite number as the text the `exact` verifier compares (`4.0` -> "4"; rule 2)."""
    if isinstance(value, str):
        return _check_encodable(value, where)
    if isinstance(value, Decimal):  # Parquet decimal columns; not a numbers.Real
        if not value.is_finite():
            raise ConfigError(f"{where} must be a finite number, got {value}")
        return str(int(value)) if value == value.to_integral_value() else str(value.normalize())
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ConfigError(f"{where} must be text or a number, got {type(value).__name__} {_short(value)}")
    if not math.isfinite(value):
        raise ConfigError(f"{where} must be a finite number, got {value}")
    if isinstance(value, numbers.Integral) or float(value).is_integer():
        return str(int(value))
    return str(value)


def _as_level(value: Any, where: str) -> int | None:
    """A whole number, an integral float, a numeric string or "Level N" as an int; empty as None (rule 3)."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        if math.isfinite(value) and float(value).is_integer():
            return int(value)
    elif isinstance(value, str) and (m := _LEVEL.fullmatch(value.strip())):
        return int(m.group(1))
    raise ConfigError(
        f"{where} must be a whole number (e.g. 3 or 'Level 3'), got {_short(value)}; the column is "
        "optional (a difficulty level: estimator=level, per-level metrics): leave it empty or remove it"
    )


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _row_prompt(
    row: dict[str, Any], where: str, keys: tuple[str, str, str | None], max_prompt_chars: int
) -> tuple[str, str, int | None]:
    """(prompt, answer, level) of one row, by rules 1-3; `where` is "<file>: row <i>"."""
    prompt_key, answer_key, level_key = keys
    for key in (prompt_key, answer_key):
        value = row.get(key)
        if value is None or (isinstance(value, str) and not value.strip()):
            which = "prompt" if key == prompt_key else "answer"
            if key in row:  # the column is right; this row's value is missing
                raise ConfigError(f"{where}: its {which} ({key!r}) is empty; give it one or remove the row")
            have = sorted(str(k) for k in row)
            raise ConfigError(
                f"{where} has no {key!r} column; its fields are {have}. Name the {which} column with "
                f"--task.{which}_key (train) or --{which}-key (eval, filter)"
            )
    text = row[prompt_key]
    if not isinstance(text, str):
        raise ConfigError(f"{where}, column {prompt_key!r}: the prompt must be text, got {type(text).__name__}")
    _check_encodable(text, f"{where}, column {prompt_key!r}")
    if len(text) > max_prompt_chars:
        raise ConfigError(
            f"{where}, column {prompt_key!r}: the prompt has {len(text)} characters; "
            f"the limit is {max_prompt_chars} (max_prompt_chars)"
        )
    answer = _as_text(row[answer_key], f"{where}, column {answer_key!r}")
    if not answer.strip():
        raise ConfigError(f"{where} has no {answer_key!r} (or it is empty)")
    level = _as_level(row.get(level_key), f"{where}, column {level_key!r}") if level_key else None
    return text, answer, level


def _finite(x: numbers.Real) -> bool:
    try:
        return math.isfinite(float(x))
    except OverflowError:  # an integer too large for a float
        return False


def _as_features(value: Any, where: str) -> list[float]:
    """Rule 8: a non-empty list of finite numbers (a JSON array in a text cell)."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            raise ConfigError(
                f"{where}: features must be a list of numbers (a JSON array in text), got {value[:40]!r}"
            ) from None
    if hasattr(value, "tolist") and not isinstance(value, list):  # a numpy array from Parquet via pandas
        value = value.tolist()
    if not isinstance(value, list | tuple) or not value:
        raise ConfigError(f"{where}: features must be a non-empty list of numbers, got {type(value).__name__}")
    out = []
    for j, x in enumerate(value):
        if isinstance(x, bool) or not isinstance(x, numbers.Real) or not _finite(x):
            raise ConfigError(f"{where}: features[{j}] = {x!r}; every value must be a finite number")
        if abs(float(x)) > MAX_FEATURE:
            raise ConfigError(
                f"{where}: features[{j}] = {x!r}; every value must be within +-{MAX_FEATURE:g} (the predictor's step "
                "divides by |x|^2, which overflows and freezes it): standardise the column (`reinforce-ada features` "
                "does)"
            )
        out.append(float(x))
    return out


def _warn_duplicates(path: Path, prompts: list[Prompt]) -> None:
    """One warning counting the rows that repeat an earlier row's prompt, answer and level, and one counting the rows
    that repeat an earlier prompt with another answer (rule 6): both are kept."""
    first: dict[tuple, int] = {}
    by_text: dict[str, tuple[int, str]] = {}  # prompt text -> (its first row, that row's answer)
    repeats, conflicts = [], []
    for i, p in enumerate(prompts, start=1):
        key = (p.text, p.answer, p.level)
        if key in first:
            repeats.append((i, first[key]))
        else:
            first[key] = i
        j, answer = by_text.setdefault(p.text, (i, p.answer))
        if answer != p.answer:
            conflicts.append((i, j, p.answer, answer))
    if repeats:
        shown = ", ".join(f"row {i} = row {j}" for i, j in repeats[:5])
        warnings.warn(
            f"{path}: {len(repeats)} row(s) repeat an earlier row's prompt, answer and level ({shown}"
            f"{', ...' if len(repeats) > 5 else ''}); they are kept",
            stacklevel=3,
        )
    if conflicts:
        shown = ", ".join(f"row {i} answers {a!r} where row {j} answers {b!r}" for i, j, a, b in conflicts[:3])
        warnings.warn(
            f"{path}: {len(conflicts)} row(s) repeat an earlier row's prompt with another answer ({shown}"
            f"{', ...' if len(conflicts) > 3 else ''}); they are kept, each as its own prompt with its own answer "
            "(a verifier scores the same completion differently on each)",
            stacklevel=3,
        )


def load_prompts(
    path: str | Path,
    *,
    prompt_key: str = "prompt",
    answer_key: str = "answer",
    level_key: str | None = "level",
    features_key: str | None = FEATURES_KEY,
    max_prompt_chars: int = MAX_PROMPT_CHARS,
) -> list[Prompt]:
    """The file's rows as prompts, by the module's rules; any bad row is a ConfigError naming it and its column."""
    p = Path(path)
    prompts = []
    width: tuple[int, int] | None = None  # (length of the first features vector, its row)
    rows = read_rows(p)
    for i, row in enumerate(rows, start=1):
        where = f"{p}: row {i}"
        text, answer, level = _row_prompt(row, where, (prompt_key, answer_key, level_key), max_prompt_chars)
        has_id = row.get("id") not in (None, "")
        pid = _as_text(row["id"], f"{where}, column 'id'") if has_id else f"{p.stem}-{i:06d}"
        meta: dict[str, Any] = {}
        if features_key and row.get(features_key) not in (None, ""):
            feats = _as_features(row[features_key], f"{where}, column {features_key!r}")
            if width is None:
                width = (len(feats), i)
            elif len(feats) != width[0]:
                raise ConfigError(
                    f"{where}, column {features_key!r}: {len(feats)} values, but row {width[1]} has {width[0]}; "
                    "every row's features must have the same length"
                )
            meta["features"] = feats
        prompts.append(Prompt(id=pid, text=text, answer=answer, level=level, meta=meta))
    if not prompts:
        raise ConfigError(f"dataset file {p} holds no rows")
    if features_key and features_key != FEATURES_KEY and width is None:
        columns = sorted({str(k) for row in rows[:100] for k in row})
        raise ConfigError(
            f"{p}: no row has the features column {features_key!r} (task.features_key); the columns are {columns}. "
            "Name the column that holds them, or leave task.features_key at its default"
        )
    refuse_repeated_ids(p, prompts)
    _warn_duplicates(p, prompts)
    return prompts


def refuse_repeated_ids(path: Path, prompts: list[Prompt]) -> None:
    """A ConfigError naming the first id that appears twice and both rows (one pass over the ids: a file of a
    million rows is checked in a second, where the old `ids.count` search took hours)."""
    first: dict[str, int] = {}
    for i, x in enumerate(prompts, start=1):
        if x.id in first:
            raise ConfigError(f"{path}: id {x.id!r} appears more than once (rows {first[x.id]} and {i})")
        first[x.id] = i
