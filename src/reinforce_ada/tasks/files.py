"""Prompt datasets from JSONL, CSV or Parquet files or a saved `datasets` folder, with column mapping.

Each row needs a prompt and an answer (keys configurable). A row with a missing or empty field is an error that
names the file, the row number and the key. Ids come from an `id` column when present, else `<file stem>-<row>`.
Parquet needs pyarrow (or pandas with a Parquet engine) and a folder written by `Dataset.save_to_disk` needs
`datasets`; both are imported only for those inputs.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

from reinforce_ada.errors import ConfigError
from reinforce_ada.types import Prompt


def _read_parquet(path: Path) -> list[dict[str, Any]]:
    try:
        import pyarrow.parquet as pq
    except ImportError:
        pq = None
    if pq is not None:
        return pq.read_table(path).to_pylist()
    try:
        import pandas as pd

        df = pd.read_parquet(path)
    except ImportError:
        raise ConfigError(f"reading {path} needs pyarrow: pip install pyarrow") from None
    return df.astype(object).where(df.notna(), None).to_dict("records")


def _read_saved_dataset(path: Path) -> list[dict[str, Any]]:
    try:
        import datasets
    except ImportError:
        raise ConfigError(
            f"{path} is a folder; reading a saved dataset needs `datasets`: pip install datasets"
        ) from None
    try:
        ds = datasets.load_from_disk(str(path))
    except FileNotFoundError as e:
        raise ConfigError(f"{path} is not a folder written by `datasets` save_to_disk ({e})") from None
    if isinstance(ds, datasets.DatasetDict):
        splits = ", ".join(str(path / name) for name in ds)
        raise ConfigError(f"{path} holds several splits; point to one of them: {splits}")
    return ds.to_list()


def read_rows(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        raise ConfigError(f"dataset file {path} does not exist")
    if path.is_dir():
        return _read_saved_dataset(path)
    if path.suffix == ".parquet":
        return _read_parquet(path)
    if path.suffix == ".csv":
        with path.open(newline="") as fh:
            return list(csv.DictReader(fh))
    if path.suffix in (".jsonl", ".json"):
        rows = []
        for i, line in enumerate(path.read_text().splitlines(), start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as e:
                raise ConfigError(f"{path}: row {i} is not valid JSON ({e.msg})") from None
            if not isinstance(row, dict):
                raise ConfigError(f"{path}: row {i} must be a JSON object, got {type(row).__name__}")
            rows.append(row)
        return rows
    raise ConfigError(f"dataset file {path} must be .jsonl, .csv, .parquet or a folder written by `datasets`")


def load_prompts(
    path: str | Path, *, prompt_key: str = "prompt", answer_key: str = "answer", level_key: str | None = "level"
) -> list[Prompt]:
    p = Path(path)
    prompts = []
    for i, row in enumerate(read_rows(p), start=1):
        for key in (prompt_key, answer_key):
            value = row.get(key)
            if value is None or str(value).strip() == "":
                have = sorted(k for k, v in row.items() if v not in (None, ""))
                raise ConfigError(f"{p}: row {i} has no {key!r} (or it is empty); its fields are {have}")
        level = row.get(level_key) if level_key else None
        pid = str(row["id"]) if row.get("id") not in (None, "") else f"{p.stem}-{i:06d}"
        prompts.append(
            Prompt(
                id=pid,
                text=str(row[prompt_key]),
                answer=str(row[answer_key]),
                level=int(level) if level not in (None, "") else None,
            )
        )
    if not prompts:
        raise ConfigError(f"dataset file {p} holds no rows")
    ids = [x.id for x in prompts]
    if len(set(ids)) != len(ids):
        dup = next(x for x in ids if ids.count(x) > 1)
        raise ConfigError(f"{p}: id {dup!r} appears more than once")
    return prompts
