"""What the verl plugin refuses and how it sizes verl's PPO mini-batches: pure, so it runs (and is tested) without verl.

1) `check_config` refuses, by key, every verl setting the plugin would silently break: a critic, verl's own group
   filter, a colocated reward model, `rollout.n` != `ada.n`, KL in the reward and `parameter_sync_step > 1`.
   - `algorithm.use_kl_in_reward`: verl subtracts beta x KL per token from `token_level_rewards` and derives
     `advantages` from them; the plugin then overwrites `advantages` with the strategy's, computed from the raw
     scores the strategy saw while sampling, so the penalty would vanish without a word. The strategy decides
     retirement on those raw rewards before any reference log-prob exists, so the penalty cannot be carried into
     its advantages either: refused, and the KL *loss* (`actor_rollout_ref.actor.use_kl_loss`) named instead, which
     verl adds in the policy loss and the plugin leaves alone.
   - `trainer.v1.<mode>.parameter_sync_step > 1`: verl would call the replay buffer's `sample` that many times per
     step, but the plugin samples once per step (`prepare_step`), so the later local updates would train on an
     empty or repeated step.
2) `minibatches` keeps the optimizer steps per step fixed as our trainer does (`optim.minibatches`, whatever the
   row count): verl's actor cuts a step into mini-batches of `ppo_mini_batch_size x rollout.n` rows, so a strategy
   that trains more rows per prompt (Est, knapsack) would get proportionally more optimizer steps. The plugin
   instead cuts every step into `data.train_batch_size / ppo_mini_batch_size` mini-batches (verl's count with a
   fixed `rollout.n`), each of as many rows as that takes, padded to a multiple of the data-parallel size and of
   `rollout.n` (verl's padding rows carry advantage 0).
3) `require_verl` turns a missing verl extra into one error naming the packages and the install command (importing
   the plugin without TransferQueue used to be a raw ModuleNotFoundError).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from reinforce_ada.errors import ConfigError
from reinforce_ada.extras import install_hint, missing

TRAINER_NAME = "reinforce_ada"


def require_verl(where: str) -> None:
    """Raise ModuleNotFoundError naming every missing package of the `verl` extra and the command to install it."""
    gone = missing("verl")
    if gone:
        raise ModuleNotFoundError(
            f"{where} needs {', '.join(gone)}, not installed here: {install_hint('verl')}; verl pins its own "
            "transformers, so give it its own virtualenv (docs/verl.md)",
            name=gone[0],
        )


def get(node: Any, path: str, default: Any = None) -> Any:
    """`node.a.b.c` for a dotted `path` over dicts or omegaconf nodes; `default` where a key is missing or None."""
    for key in path.split("."):
        if node is None:
            return default
        node = node.get(key, None) if hasattr(node, "get") else getattr(node, key, None)
    return default if node is None else node


def check_config(config: Any, cfg: Any, *, need_critic: Callable[[Any], bool]) -> None:
    """Refuse verl settings the plugin would silently break, naming the key and what to set instead (module
    docstring, 1). `cfg` is the strategy's `StrategyConfig`; `need_critic` is verl's own rule."""
    if get(config, "algorithm.filter_groups.enable", False):
        raise ConfigError(
            "algorithm.filter_groups.enable=True: the strategy decides retirement; use +ada.strategy=dynamic"
        )
    if need_critic(config):
        raise ConfigError(
            f"algorithm.adv_estimator={get(config, 'algorithm.adv_estimator')} trains a critic, which reinforce_ada "
            "does not support: set algorithm.adv_estimator=grpo (verl's default is gae); the strategy's advantages "
            "replace it"
        )
    if get(config, "algorithm.use_kl_in_reward", False):
        raise ConfigError(
            "algorithm.use_kl_in_reward=True: verl puts the KL penalty only into token_level_rewards, and the "
            "plugin's advantages come from the strategy's rewards, so the penalty would be dropped without a word. "
            "Set algorithm.use_kl_in_reward=False and, for a KL term, actor_rollout_ref.actor.use_kl_loss=True "
            "(verl adds it in the policy loss, which the plugin keeps)"
        )
    mode = get(config, "trainer.v1.trainer_mode", TRAINER_NAME)
    for section in dict.fromkeys((mode, TRAINER_NAME, "sync")):
        steps = get(config, f"trainer.v1.{section}.parameter_sync_step", 1)
        if steps != 1:
            raise ConfigError(
                f"trainer.v1.{section}.parameter_sync_step={steps}: the plugin samples one step per weight sync "
                "(every round of a prompt on the same policy, as in the paper), so verl's local updates within a "
                "sync would train on an empty or repeated step; set it to 1 (or leave it out)"
            )
    reward_model = get(config, "reward.reward_model", {})
    if get(reward_model, "enable", False) and not get(reward_model, "enable_resource_pool", False):
        raise ConfigError(
            "reward.reward_model.enable=True without reward.reward_model.enable_resource_pool: a colocated reward "
            "model scores after sampling, but the strategy needs each reward as it arrives; give it its own pool "
            "or use a rule-based reward (the same condition as verl's algorithm.filter_groups)"
        )
    n = int(get(config, "actor_rollout_ref.rollout.n", 1))
    if n != cfg.options.n:
        raise ConfigError(
            f"actor_rollout_ref.rollout.n={n} but ada.n={cfg.options.n}: verl sizes PPO mini-batches as "
            f"ppo_mini_batch_size x rollout.n trained rows, so set actor_rollout_ref.rollout.n={cfg.options.n}"
        )


@dataclass(frozen=True)
class MiniBatches:
    """How one step's trained rows are cut for verl's actor (module docstring, 2)."""

    count: int
    """Mini-batches (optimizer steps per PPO epoch): `train_batch_size // ppo_mini_batch_size`, whatever the rows."""
    rows: int
    """Rows per mini-batch: a multiple of the data-parallel size and of `rollout.n`."""
    rollout_n: int = 1

    @property
    def padded(self) -> int:
        """The step's rows after verl's padding: exactly `count` mini-batches."""
        return self.count * self.rows

    @property
    def ppo_mini_batch_size(self) -> int:
        """The `actor.ppo_mini_batch_size` (in prompts, verl multiplies it by `rollout.n`) that gives `rows`."""
        return self.rows // self.rollout_n


def minibatches(
    trained_rows: int, *, train_batch_size: int, ppo_mini_batch_size: int, rollout_n: int, dp_size: int
) -> MiniBatches:
    """The mini-batches of a step that trains `trained_rows` rows: verl's count for a fixed `rollout.n`, the rows
    split evenly over them. With `trained_rows = train_batch_size x rollout.n` this is verl's own sizing."""
    for name, value in (
        ("data.train_batch_size", train_batch_size),
        ("actor_rollout_ref.actor.ppo_mini_batch_size", ppo_mini_batch_size),
        ("actor_rollout_ref.rollout.n", rollout_n),
        ("the data-parallel size", dp_size),
    ):
        if value < 1:
            raise ConfigError(f"{name}={value} must be >= 1")
    count = max(1, train_batch_size // ppo_mini_batch_size)
    unit = math.lcm(dp_size, rollout_n)
    rows = unit * max(1, math.ceil(trained_rows / (count * unit)))
    return MiniBatches(count, rows, rollout_n)
