"""The strategy's state in TRL checkpoints: `reinforce_ada/state_rank{r}.json` in each `checkpoint-N` folder.

Every process writes its own file (the prompt memory is the same on all, the generator and refill order are not),
atomically.
On resume a process reads its own file, or rank 0's when the run had fewer processes. A file that cannot be trusted
is refused with a `ConfigError` naming it and what is wrong, rather than resuming on damaged or foreign state:
1) not readable, not UTF-8, not JSON, or nested too deep (a raw JSONDecodeError/RecursionError before);
2) NaN or infinity anywhere (JSON has no such numbers; Python's json reads them silently, and no state we write holds
   one, so a NaN-filled file is damage, not data);
3) not the shape we write (`strategy`, `order`, `config` entries), or a strategy state the strategy cannot load;
4) another strategy's state (`config.name` differs from this run's `strategy`). Other options that differ (say
   `max_samples`) are allowed, with a warning naming them: changing them on resume can be deliberate.
"""

from __future__ import annotations

import json
import os
import warnings
from pathlib import Path
from typing import Any

from reinforce_ada.errors import ConfigError
from reinforce_ada.sampling.config import StrategyConfig
from reinforce_ada.sampling.configure import changed_options

KEYS = ("strategy", "order", "config")
FIX = "resume from an earlier checkpoint, or delete the file to start the strategy fresh"


def state_path(checkpoint: Path, rank: int) -> Path:
    return checkpoint / "reinforce_ada" / f"state_rank{rank}.json"


def write_state(checkpoint: Path, rank: int, state: dict[str, Any]) -> None:
    path = state_path(checkpoint, rank)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(state))
    os.replace(tmp, path)  # atomic: a kill mid-write leaves no half-written state


def _no_constants(name: str) -> Any:
    raise ValueError(f"it holds {name}, which no reinforce-ada state contains (a damaged or edited file)")


def read_state(checkpoint: Path, rank: int, config: StrategyConfig) -> tuple[Path, dict[str, Any]] | None:
    """(the file read, its state) for this process, or None (with a warning) when the checkpoint has none."""
    path = state_path(checkpoint, rank)
    if not path.exists():
        path = state_path(checkpoint, 0)
        if not path.exists():
            warnings.warn(f"{checkpoint} has no reinforce-ada state: the strategy starts fresh", stacklevel=3)
            return None
        warnings.warn(
            f"{checkpoint}: no state for this process; loading rank 0's (the prompt memory is shared)", stacklevel=3
        )
    try:
        state = json.loads(path.read_text(encoding="utf-8"), parse_constant=_no_constants)
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"{path}: cannot read the reinforce-ada state ({e}); {FIX}") from None
    except json.JSONDecodeError as e:
        raise ConfigError(
            f"{path} is not valid JSON ({e.msg} at line {e.lineno}, column {e.colno}): the reinforce-ada state is "
            f"damaged (a truncated or interrupted write?); {FIX}"
        ) from None
    except RecursionError:
        raise ConfigError(f"{path}: the reinforce-ada state is nested too deep to be one we wrote; {FIX}") from None
    except ValueError as e:
        raise ConfigError(f"{path}: {e}; {FIX}") from None
    if not isinstance(state, dict) or any(k not in state for k in KEYS) or not isinstance(state["config"], dict):
        got = sorted(state) if isinstance(state, dict) else type(state).__name__
        raise ConfigError(f"{path} is not a reinforce-ada state: expected the entries {list(KEYS)}, got {got}; {FIX}")
    saved = state["config"].get("name")
    if saved != config.name:
        raise ConfigError(
            f"{path} holds the state of strategy {saved!r}, but this run's strategy is {config.name!r}: resume with "
            f"strategy={saved!r}, or start the strategy fresh from a checkpoint without reinforce_ada/"
        )
    mine = config.to_dict()
    changed = changed_options(state["config"], config)
    if changed:
        was = ", ".join(f"{k}={state['config'][k]!r} -> {mine[k]!r}" for k in changed)
        warnings.warn(f"{path}: resuming with changed strategy options: {was}", stacklevel=3)
    return path, state


def load_into(path: Path, state: dict[str, Any], strategy: Any, order: Any) -> None:
    """Load a read state into the strategy (and the refill order, if it was built), naming the file on failure."""
    try:
        strategy.load_state_dict(state["strategy"])
        if state["order"] is not None:
            order().load_state_dict(state["order"])
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as e:
        raise ConfigError(
            f"{path}: the {state['config'].get('name')!r} strategy cannot load this state "
            f"({type(e).__name__}: {e}); {FIX}"
        ) from None
