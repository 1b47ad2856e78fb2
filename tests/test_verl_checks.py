"""The verl plugin's refusals and mini-batch sizing, without verl (`integrations.verl_checks` is pure): a verl config
is a plain nested dict here, as omegaconf's `DictConfig` reads the same through `.get`."""

from __future__ import annotations

import copy
import importlib

import pytest

from reinforce_ada.errors import ConfigError
from reinforce_ada.extras import missing
from reinforce_ada.integrations.verl_checks import check_config, minibatches
from reinforce_ada.sampling.configure import strategy_config

BASE = {
    "algorithm": {"adv_estimator": "grpo", "use_kl_in_reward": False, "filter_groups": {"enable": False}},
    "reward": {"reward_model": {"enable": False, "enable_resource_pool": False}},
    "actor_rollout_ref": {"rollout": {"n": 4}, "actor": {"ppo_mini_batch_size": 8}},
    "trainer": {"v1": {"trainer_mode": "reinforce_ada", "sync": {}}},
    "data": {"train_batch_size": 32},
}


def verl_config(**changes: object) -> dict:
    """BASE with dotted keys set, e.g. verl_config(**{"algorithm.use_kl_in_reward": True})."""
    cfg = copy.deepcopy(BASE)
    for dotted, value in changes.items():
        node = cfg
        *path, last = dotted.split(".")
        for key in path:
            node = node.setdefault(key, {})
        node[last] = value
    return cfg


def no_critic(config: dict) -> bool:
    return config["algorithm"]["adv_estimator"] == "gae"


def test_the_base_config_passes():
    check_config(verl_config(), strategy_config("seq", n=4), need_critic=no_critic)


def test_kl_in_reward_is_refused_by_name_and_the_kl_loss_is_named_instead():
    """Issue 40 item 1: verl puts beta x KL only into token_level_rewards; our advantages overwrite the ones derived
    from them, so the penalty vanished. Refused, naming the key and the KL loss the plugin keeps."""
    with pytest.raises(ConfigError, match=r"algorithm.use_kl_in_reward=True.*use_kl_loss=True"):
        check_config(
            verl_config(**{"algorithm.use_kl_in_reward": True}), strategy_config("seq", n=4), need_critic=no_critic
        )


@pytest.mark.parametrize("section", ["reinforce_ada", "sync"])
def test_parameter_sync_step_above_one_is_refused(section):
    """Issue 40 item 6: verl's step calls `sample` parameter_sync_step times; the plugin samples once per step."""
    cfg = verl_config(**{f"trainer.v1.{section}.parameter_sync_step": 2})
    with pytest.raises(ConfigError, match=rf"trainer.v1.{section}.parameter_sync_step=2.*set it to 1"):
        check_config(cfg, strategy_config("seq", n=4), need_critic=no_critic)
    check_config(
        verl_config(**{f"trainer.v1.{section}.parameter_sync_step": 1}),
        strategy_config("seq", n=4),
        need_critic=no_critic,
    )


@pytest.mark.parametrize(
    "changes, match",
    [
        ({"algorithm.adv_estimator": "gae"}, "trains a critic"),
        ({"algorithm.filter_groups.enable": True}, "filter_groups"),
        ({"reward.reward_model.enable": True}, "enable_resource_pool"),
        ({"actor_rollout_ref.rollout.n": 8}, "rollout.n=8 but ada.n=4"),
    ],
)
def test_the_earlier_refusals_still_name_their_key(changes, match):
    with pytest.raises(ConfigError, match=match):
        check_config(verl_config(**changes), strategy_config("seq", n=4), need_critic=no_critic)


def test_optimizer_steps_per_step_do_not_grow_with_the_rows_a_strategy_trains():
    """Issue 40 item 6: verl cuts a step into mini-batches of ppo_mini_batch_size x rollout.n rows, so Est training
    twice the rows got twice the optimizer steps. The plugin keeps verl's count for a fixed rollout.n (as our
    trainer's `optim.minibatches` is a count) and spreads the rows over them."""
    kw = {"train_batch_size": 32, "ppo_mini_batch_size": 8, "rollout_n": 4, "dp_size": 2}
    fixed = minibatches(32 * 4, **kw)  # uniform / seq: n rows per prompt -> verl's own sizing
    assert (fixed.count, fixed.rows, fixed.ppo_mini_batch_size) == (4, 32, 8)
    for rows in (1, 37, 128, 256, 1000):  # Est and knapsack: any number of rows
        mb = minibatches(rows, **kw)
        assert mb.count == 4 and mb.padded >= rows and mb.padded - rows < mb.count * 4  # less than a unit per batch
        assert mb.rows % 2 == 0 and mb.rows % 4 == 0  # divisible by the dp size and rollout.n
        verl_steps = -(-rows // (8 * 4))  # what verl's own sizing would do
        assert mb.count <= max(verl_steps, 4)
    with pytest.raises(ConfigError, match="ppo_mini_batch_size=0"):
        minibatches(10, train_batch_size=32, ppo_mini_batch_size=0, rollout_n=4, dp_size=1)


@pytest.mark.skipif(not missing("verl"), reason="verl's extra is installed here")
def test_importing_the_plugin_without_verls_extra_names_the_install_command():
    for module in ("reinforce_ada.integrations.verl", "reinforce_ada.integrations.verl_driver"):
        with pytest.raises(ModuleNotFoundError, match=r"needs .*pip install 'reinforce-ada\[verl\]'"):
            importlib.import_module(module)
