"""The one reader of user files: rows of JSONL, a JSON array, CSV, Parquet or a saved `datasets` folder.

Every file of rows a user gives -- prompts and their features and answers (`tasks.files`, `tasks.code`, `eval` and
`filter` datasets), pass-rate priors (`sampling.memory.priors`), `plan --pass-rates-file` (`cli.plan`) -- is read
here, so the same rules hold everywhere, and an error names the file, the row and the value:
1) the path is a regular file (or a `datasets` folder): a FIFO, socket or device is refused before it is opened; so
   is a file too big for the memory this process can get (`MEMORY_PER_BYTE` x its size against
   `cpu_load.usable_memory`: free memory and the process's own limits), and a text file holding NUL bytes;
2) text is UTF-8 (a leading byte-order mark is dropped); invalid bytes are an error naming the line;
3) JSONL: one JSON object per non-blank line, lines ending at "\n" only (U+2028 and U+0085 are valid inside a JSON
   string; `str.splitlines` would break there); a `.json` file may instead be one JSON array of objects (a caller
   that takes bare values, `bare="p"`, reads a row that is a bare JSON value `v` as `{"p": v}`); a value
   nested too deeply for Python's parser is an error naming the row; `NaN` and `Infinity` (which Python's parser
   accepts) are read as numbers here and refused by the value rules below;
4) CSV: a header line; a row with more fields than the header is an error; fields have no length limit of their own
   (the file is already in memory);
5) values: `finite_number`, `whole_number` and `share` refuse booleans, text that is not a number, NaN and
   infinities and a fraction where a count is meant (`samples: 2.5`, `pass_rate: true`), naming the file, the row,
   the key and the value; each reader states its own duplicate rule (prompts warn, priors refuse conflicts).
"""

from __future__ import annotations

import csv
import io
import json
import math
import numbers
from pathlib import Path
from typing import Any

from reinforce_ada.cpu_load import usable_memory
from reinforce_ada.errors import ConfigError

SUFFIXES = (".jsonl", ".json", ".csv", ".parquet")


def _read_parquet(path: Path) -> list[dict[str, Any]]:
    try:
        import pyarrow.parquet as pq
    except ImportError:
        pq = None
    if pq is not None:
        import pyarrow as pa

        try:
            return pq.read_table(path).to_pylist()
        except (pa.ArrowException, OSError) as e:  # deliberate: a truncated or corrupt file, reported by name
            raise ConfigError(f"{path} is not a readable Parquet file ({e})") from None
    try:
        import pandas as pd

        df = pd.read_parquet(path)
    except ImportError:
        raise ConfigError(f"reading {path} needs pyarrow: pip install pyarrow") from None
    except (ValueError, OSError) as e:  # deliberate: as above, through pandas
        raise ConfigError(f"{path} is not a readable Parquet file ({e})") from None
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


def decode(path: Path) -> str:
    """The file's text as UTF-8 (a leading byte-order mark dropped); invalid bytes are an error naming the line."""
    data = path.read_bytes()
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = data[: e.start].count(b"\n") + 1
        raise ConfigError(
            f"{path}: line {line} is not valid UTF-8 (byte {e.start}: {data[e.start : e.start + 4]!r}); "
            "save the file as UTF-8"
        ) from None


def _read_csv(path: Path) -> list[dict[str, Any]]:
    """Rows of a CSV file with a header line; a row with more fields than the header is an error."""
    text = decode(path)
    old = csv.field_size_limit()
    csv.field_size_limit(max(old, len(text) + 1))  # no field can be longer than the file already in memory
    try:
        rows = list(csv.DictReader(io.StringIO(text, newline="")))
    except csv.Error as e:  # deliberate: e.g. a NUL byte; reported by file
        raise ConfigError(f"{path} is not a readable CSV file ({e})") from None
    finally:
        csv.field_size_limit(old)
    for i, row in enumerate(rows, start=1):
        if None in row:  # DictReader files surplus fields under the key None
            raise ConfigError(f"{path}: row {i} has {len(row[None])} more field(s) than the header's {len(row) - 1}")
    return rows


def _row(row: Any, path: Path, i: int, bare: str | None) -> dict[str, Any]:
    """A parsed row as a dict: an object, or a bare value under the key `bare` (when the caller takes them)."""
    if bare is not None and not isinstance(row, dict | list):
        return {bare: row}
    if not isinstance(row, dict):
        raise ConfigError(f"{path}: row {i} must be a JSON object, got {type(row).__name__}")
    return row


def _read_jsonl(path: Path, bare: str | None = None) -> list[dict[str, Any]]:
    """One JSON object (or bare value, module docstring 3) per non-blank line; the row number is the line number."""
    rows = []
    # lines end at "\n" only: str.splitlines also breaks at U+2028, U+0085 and other characters that JSON allows raw
    # inside a string, so a valid row holding one was refused as invalid JSON
    text = decode(path)
    if path.suffix == ".json" and text.lstrip().startswith("["):  # rule 3: one JSON array of objects
        return _read_json_array(path, text, bare)
    for i, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as e:
            raise ConfigError(f"{path}: row {i} is not valid JSON, not a JSON object ({e.msg})") from None
        except RecursionError:  # deliberate: Python's JSON parser recurses once per nesting level
            raise ConfigError(f"{path}: row {i} is nested too deeply to read as JSON") from None
        rows.append(_row(row, path, i, bare))
    return rows


MEMORY_PER_BYTE = 12
"""Memory reading a row file takes per byte of it (the bytes, the decoded text, its lines and the rows' Python
objects: about 10x for JSONL rows of short prompts); a file needing more than the memory this process can get is
refused up front."""


def check_size(path: Path, what: str = "dataset file") -> None:
    """Refuse, before reading, a file too big for the memory this process can get, and a text file that starts with
    NUL bytes (a binary or sparse file: a 2 GB sparse file used to end in a MemoryError after minutes)."""
    size = path.stat().st_size
    memory = usable_memory()
    if size * MEMORY_PER_BYTE > memory:
        raise ConfigError(
            f"{what} {path} is {size / 2**30:.1f} GiB; reading it takes about {MEMORY_PER_BYTE}x that, more than "
            f"the {memory / 2**30:.1f} GiB of memory this process can get: split it or sample fewer rows"
        )
    if path.suffix in (".jsonl", ".json", ".csv"):
        with path.open("rb") as fh:
            head = fh.read(1 << 16)
        nul = head.find(b"\x00")
        if nul >= 0:
            raise ConfigError(f"{what} {path}: byte {nul} is a NUL byte; a binary or sparse file, not UTF-8 text")


def read_rows(
    path: Path, what: str = "dataset file", suffixes: tuple[str, ...] = SUFFIXES, bare: str | None = None
) -> list[dict[str, Any]]:
    """Every row of the file (module docstring, 1-4); `what` names the file in errors, `suffixes` the kinds this
    reader's caller takes (a folder is a saved `datasets` folder, when ".parquet" is among them), `bare` the key a
    bare JSON value is read under (None: every row must be an object)."""
    path = Path(path)
    if not path.exists():
        raise ConfigError(f"{what} {path} does not exist")
    if path.is_dir() and ".parquet" in suffixes:
        return _read_saved_dataset(path)
    if not path.is_file():  # rule 1: opening a FIFO blocks until a writer comes; a device may never end
        raise ConfigError(f"{what} {path} is not a regular file (a FIFO, socket or device); give a file")
    if path.suffix not in suffixes:
        listed = [x for x in suffixes if x != ".json"] if ".jsonl" in suffixes and ".parquet" in suffixes else suffixes
        if ".parquet" in suffixes:
            kinds = ", ".join(listed) + " or a folder written by `datasets`"
        else:
            kinds = f"{', '.join(listed[:-1])} or {listed[-1]}" if len(listed) > 1 else listed[0]
        raise ConfigError(f"{what} {path} must be {kinds}")
    check_size(path, what)
    if path.suffix == ".parquet":
        return _read_parquet(path)
    if path.suffix == ".csv":
        return _read_csv(path)
    return _read_jsonl(path, bare)


def _read_json_array(path: Path, text: str, bare: str | None = None) -> list[dict[str, Any]]:
    try:
        rows = json.loads(text)
    except json.JSONDecodeError as e:
        raise ConfigError(f"{path}: not a JSON array of rows ({e.msg} at line {e.lineno})") from None
    except RecursionError:  # deliberate: Python's JSON parser recurses once per nesting level
        raise ConfigError(f"{path}: nested too deeply to read as JSON") from None
    return [_row(row, path, i, bare) for i, row in enumerate(rows, start=1)]


def _where(path: Path, row: int, key: str) -> str:
    return f"{path}: row {row}: {key}"


def finite_number(value: Any, path: Path, row: int, key: str) -> float:
    """A real number, finite: an int, a float or numeric text (CSV), never a boolean (rule 5)."""
    where = _where(path, row, key)
    if isinstance(value, bool) or value is None:
        raise ConfigError(f"{where}={value!r} must be a number")
    if isinstance(value, str):
        try:
            value = float(value.strip())
        except ValueError:
            raise ConfigError(f"{where}={value!r} must be a number") from None
    if not isinstance(value, numbers.Real) or not math.isfinite(float(value)):
        raise ConfigError(f"{where}={value!r} must be a finite number")
    return float(value)


def share(value: Any, path: Path, row: int, key: str) -> float:
    """A finite number in [0, 1] (a pass rate)."""
    x = finite_number(value, path, row, key)
    if not 0.0 <= x <= 1.0:
        raise ConfigError(f"{_where(path, row, key)}={x!r} must be a number in [0, 1]")
    return x


def whole_number(value: Any, path: Path, row: int, key: str, lo: int = 0) -> int:
    """A whole number >= `lo`: an int, an integral float (`8.0`) or its text, never a fraction or a boolean."""
    x = finite_number(value, path, row, key)
    if not x.is_integer() or x < lo:
        raise ConfigError(f"{_where(path, row, key)}={value!r} must be a whole number >= {lo}")
    return int(x)
