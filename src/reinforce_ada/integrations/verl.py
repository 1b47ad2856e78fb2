"""Reinforce-Ada as a verl (>= 0.9.1, < 0.10) plugin: `trainer.v1.trainer_mode=reinforce_ada` (docs/verl.md).

verl imports every entry point of the `verl.plugins` group when `import verl` runs (`VERL_USE_EXTERNAL_PLUGINS`,
default `auto`); ours is this module, which registers `AdaPPOTrainer` under `TRAINER_NAME` in verl's v1 trainer
registry. The trainer is verl's synchronous colocated trainer (`PPOTrainerSync`) with five seams replaced:
1) `prepare_step`: instead of one fixed batch of `rollout.n` sessions per prompt, `StepDriver.begin`
   (`integrations.verl_driver`) runs the strategy named by `+ada.strategy=...` (any of `sampling.strategies`,
   built once by `build_strategy`) and dispatches each request as a row with `__rollout_n__ = k`;
2) `_build_replay_buffer` -> `AdaReplayBuffer`, a `ReplayBuffer` subclass whose `sample` polls TransferQueue, hands
   every finished uid's rewards (its `rm_scores`) to the strategy, which may dispatch more (Seq's rounds, DAPO
   refills), and returns the kept trajectories once the strategy is done; the rest is cleared from TransferQueue;
3) `_compute_advantage`: verl computes its estimator (rollout correction stays verl's; KL in the reward is refused:
   `verl_checks`), then `write_advantages` overwrites `advantages` and `returns` with ours (advantage x per-prompt
   weight per token of the response mask), so the strategy's baseline and weights reach verl's policy loss unchanged;
4) `_save_checkpoint` / `_load_checkpoint`: the strategy and its prompt memory go to
   `global_step_N/reinforce_ada.json` next to verl's actor and dataloader state;
5) `_get_required_batch_multiple` / `_update_actor`: a step is cut into verl's number of PPO mini-batches for a
   fixed `rollout.n`, whatever the rows the strategy trains (`verl_checks.minibatches`), as our trainer's
   `optim.minibatches` is a count.
The step's ledger is logged through verl's tracker under `ada/` (the sampler's metrics dict).
Not supported: a critic (GAE), verl's own `algorithm.filter_groups` (use `+ada.strategy=dynamic`), async modes.
"""

from __future__ import annotations

import json
import logging
import os
import time
from pathlib import Path
from typing import Any

from reinforce_ada.integrations.verl_checks import TRAINER_NAME, check_config, minibatches, require_verl

require_verl("reinforce-ada's verl plugin")  # one error naming the missing packages, not a raw ModuleNotFoundError

import torch  # noqa: E402
import transfer_queue as tq  # noqa: E402
from omegaconf import DictConfig, OmegaConf, open_dict  # noqa: E402
from tensordict import TensorDict  # noqa: E402
from transfer_queue import KVBatchMeta  # noqa: E402
from verl.trainer.ppo.utils import need_critic  # noqa: E402
from verl.trainer.ppo.v1 import PPOTrainerSync, register_trainer  # noqa: E402
from verl.trainer.ppo.v1.replay_buffer import ReplayBuffer  # noqa: E402
from verl.workers.utils.padding import response_to_nested  # noqa: E402

from reinforce_ada.errors import ConfigError  # noqa: E402
from reinforce_ada.integrations.verl_driver import Session, StepDriver, Trained  # noqa: E402
from reinforce_ada.sampling.config import StrategyConfig  # noqa: E402
from reinforce_ada.sampling.configure import strategy_config  # noqa: E402
from reinforce_ada.sampling.options import options_class  # noqa: E402
from reinforce_ada.sampling.strategies import AUTO, strategy_class  # noqa: E402
from reinforce_ada.training.replay import refuse as refuse_replay  # noqa: E402

TESTED_VERL = ">=0.9.1,<0.10"
STATE_FILE = "reinforce_ada.json"
DRIVER_KEYS = {"strategy": "the strategy name (a registered name)", "poll_interval_s": "TransferQueue poll period"}
USED = {
    PPOTrainerSync: (
        "_fetch_one_gen_batch",
        "_submit_batch_to_rollout",
        "prepare_step",
        "_compute_advantage",
        "_get_required_batch_multiple",
        "_update_actor",
    ),
    ReplayBuffer: ("_sync_metadata_from_transfer_queue",),
}
"""verl methods the plugin calls or overrides. They are checked when the trainer is built, not at import: verl
swallows a plugin's import error at DEBUG level, so only a later check can fail loudly."""
BUFFER_STATE = ("partitions", "finished_keys", "failure_keys", "poll_interval")
"""`ReplayBuffer` attributes (set by its __init__) that `AdaReplayBuffer.sample` reads."""
logger = logging.getLogger(__name__)


def check_verl() -> None:
    """Fail naming the tested range when verl's version or the methods we use differ."""
    import verl
    from packaging.specifiers import SpecifierSet

    gone = [f"{cls.__name__}.{name}" for cls, names in USED.items() for name in names if not hasattr(cls, name)]
    if verl.__version__ not in SpecifierSet(TESTED_VERL) or gone:
        raise RuntimeError(
            f"reinforce-ada's verl plugin is tested with verl{TESTED_VERL}; found verl {verl.__version__}"
            + (f", which lacks {gone}" if gone else "")
            + f": pip install 'verl{TESTED_VERL}'"
        )


def strategy_config_from(config: DictConfig) -> tuple[StrategyConfig, float]:
    """`StrategyConfig` from verl's `ada` section (`+ada.strategy=seq +ada.n=4 ...`), and the poll period."""
    raw = config.get("ada", None)
    section: dict[str, Any] = dict(OmegaConf.to_container(raw, resolve=True)) if raw is not None else {}
    poll = float(section.pop("poll_interval_s", 0.5))
    if "strategy" in section:
        if "name" in section:
            raise ConfigError("give ada.strategy or ada.name, not both")
        section["name"] = section.pop("strategy")
    name = section.pop("name", "seq")
    refuse_replay(section.pop("replay", False), "the verl plugin", option="ada.replay")
    valid = set(options_class(strategy_class(name if name != "auto" else AUTO).Options, section).__dataclass_fields__)
    valid |= {"seed"}
    unknown = sorted(set(section) - valid)
    if unknown:
        raise ConfigError(
            f"unknown ada.* keys {unknown} for strategy {name!r}; valid: {sorted(valid) + sorted(DRIVER_KEYS)}"
        )
    if poll <= 0:
        raise ConfigError(f"ada.poll_interval_s={poll} must be > 0")
    return strategy_config(name, **section), poll


def read_sessions(partition: dict[str, dict], uids: list[str], partition_id: str) -> dict[str, list[Session]]:
    """Each finished uid's sessions from TransferQueue: reward = the sum of the last output's `rm_scores`."""
    keys_by_uid: dict[str, list[str]] = {u: [] for u in uids}
    for key in partition:
        uid = key.split("_", 1)[0]
        if uid in keys_by_uid and key != uid:
            keys_by_uid[uid].append(key)
    keys = [k for u in uids for k in keys_by_uid[u]]
    rewards: dict[str, float] = {}
    if keys:
        data = tq.kv_batch_get(keys=keys, partition_id=partition_id, select_fields=["rm_scores"])
        rewards = {k: float(r.sum()) for k, r in zip(keys, data["rm_scores"].unbind(), strict=True)}
    out: dict[str, list[Session]] = {}
    for uid in uids:
        sessions: dict[int, list[str]] = {}
        for key in keys_by_uid[uid]:
            _, sid, _ = key.split("_")
            sessions.setdefault(int(sid), []).append(key)
        out[uid] = []
        for sid, ks in sorted(sessions.items()):
            ks.sort(key=lambda k: int(k.rsplit("_", 1)[1]))
            tokens = sum(int(partition[k].get("response_len", 0)) for k in ks)
            out[uid].append(Session(sid, rewards[ks[-1]], ks, tokens))
    return out


def write_advantages(batch: KVBatchMeta, advantage: dict[str, float]) -> KVBatchMeta:
    """Overwrite `advantages` and `returns` of the batch's trajectories with one scalar per key on every response
    token (keys not in `advantage`, e.g. verl's divisibility padding, get 0)."""
    data = tq.kv_batch_get(keys=batch.keys, partition_id=batch.partition_id, select_fields=["response_mask"])
    mask = data["response_mask"]
    scale = torch.tensor([advantage.get(k, 0.0) for k in batch.keys], dtype=torch.float32)
    padded = mask.to_padded_tensor(0).to(torch.float32) * scale[:, None]
    fields = TensorDict(
        {"advantages": response_to_nested(padded, mask), "returns": response_to_nested(padded.clone(), mask)},
        batch_size=len(batch.keys),
    )
    return tq.kv_batch_put(keys=batch.keys, partition_id=batch.partition_id, fields=fields)


class AdaReplayBuffer(ReplayBuffer):
    """verl's sync `ReplayBuffer` whose training partition is filled by the strategy (module docstring, 2)."""

    def __init__(self, *args: Any, driver: StepDriver, **kwargs: Any):
        super().__init__(*args, **kwargs)
        missing = [name for name in BUFFER_STATE if not hasattr(self, name)]
        if missing:
            raise RuntimeError(f"verl's ReplayBuffer no longer sets {missing}; tested with verl{TESTED_VERL}")
        self.driver = driver
        self.last: Trained | None = None

    def sample(self, global_steps: int, partition_id: str, batch_size: int) -> tuple[KVBatchMeta, dict]:
        if partition_id == "val":
            return super().sample(global_steps, partition_id, batch_size)
        driver = self.driver
        while True:
            self._sync_metadata_from_transfer_queue()
            terminal = self.finished_keys[partition_id] | self.failure_keys[partition_id]
            ready = [uid for uid in driver.outstanding if uid in terminal]
            if ready:
                partition = self.partitions[partition_id]
                for uid, sessions in read_sessions(partition, ready, partition_id).items():
                    driver.observe(uid, sessions, pump=False)
                driver.pump()  # one dispatch for every request this poll made possible
                continue
            if driver.done():
                break
            if not driver.outstanding:
                raise RuntimeError(f"{driver.cfg.name} is not done but has nothing dispatched or to dispatch")
            time.sleep(self.poll_interval)
        trained = driver.finish()
        tags = dict(self.partitions[partition_id])
        tq.kv_clear(keys=trained.discard, partition_id=partition_id)
        self.last = trained
        meta = KVBatchMeta(partition_id=partition_id, keys=trained.keys, tags=[tags[k] for k in trained.keys])
        return meta, dict(trained.metrics)


def save_state(folder: str | os.PathLike, driver: StepDriver) -> Path:
    """Write the driver's state (strategy and prompt memory, JSON) into a verl checkpoint folder, atomically."""
    path = Path(folder) / STATE_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(driver.state_dict()))
    tmp.replace(path)
    return path


def load_state(folder: str | os.PathLike, driver: StepDriver) -> bool:
    """Read the state `save_state` wrote; False (and a warning) for a checkpoint made without the plugin."""
    path = Path(folder) / STATE_FILE
    if not path.exists():
        logger.warning("no %s in %s: the strategy's prompt memory starts empty", STATE_FILE, folder)
        return False
    driver.load_state_dict(json.loads(path.read_text()))
    return True


@register_trainer(TRAINER_NAME)
class AdaPPOTrainer(PPOTrainerSync):
    """verl's sync trainer with reinforce-ada sampling (module docstring)."""

    def __init__(self, config: DictConfig):
        check_verl()
        self.ada_config, self.ada_poll_s = strategy_config_from(config)
        check_config(config, self.ada_config, need_critic=need_critic)
        self.ada = StepDriver(self.ada_config, fetch_batch=self._ada_fetch, dispatch=self._ada_dispatch)
        super().__init__(config)
        self.trainer_mode = "sync"  # every "sync"-only branch of verl's base trainer applies to us

    def _ada_fetch(self) -> TensorDict:
        return self._fetch_one_gen_batch()

    def _ada_dispatch(self, rows: TensorDict) -> None:
        from verl.utils import tensordict_utils as tu

        tu.assign_non_tensor_data(rows, "global_steps", self.global_steps)
        self._submit_batch_to_rollout(rows)

    def _build_replay_buffer(self) -> ReplayBuffer:
        sampler = self.config.trainer.v1.sampler
        return AdaReplayBuffer(
            trainer_mode="sync",
            trainer_config=self.config.trainer.v1.get("sync", {}),
            max_off_policy_threshold=sampler.max_off_policy_threshold,
            max_off_policy_strategy=sampler.max_off_policy_strategy,
            sampler_kwargs=sampler.sampler_kwargs,
            poll_interval=self.ada_poll_s,
            refill_fn=self._add_prompts_to_generate,
            driver=self.ada,
        )

    def prepare_step(self) -> dict:
        self.ada.begin(int(self.config.data.train_batch_size))
        return {}

    def _compute_advantage(self, batch: KVBatchMeta, metrics: dict) -> KVBatchMeta:
        batch = super()._compute_advantage(batch, metrics)
        trained = self.replay_buffer.last
        if trained is None:
            raise RuntimeError("no reinforce-ada step was sampled before the advantage computation")
        return write_advantages(batch, trained.advantage)

    def _get_required_batch_multiple(self, dp_size: int) -> int:
        # pad to exactly `count` mini-batches of this step's rows (verl_checks, 2): the optimizer steps per step stay
        # verl's count for a fixed rollout.n, however many rows the strategy trains
        trained = self.replay_buffer.last
        if trained is None:
            raise RuntimeError("no reinforce-ada step was sampled before the batch was padded")
        actor = self.config.actor_rollout_ref
        self.ada_minibatches = minibatches(
            len(trained.keys),
            train_batch_size=int(self.config.data.train_batch_size),
            ppo_mini_batch_size=int(actor.actor.ppo_mini_batch_size),
            rollout_n=int(actor.rollout.n),
            dp_size=dp_size,
        )
        return self.ada_minibatches.padded

    def _update_actor(self, batch: KVBatchMeta, metrics: dict) -> KVBatchMeta:
        # verl's actor reads its mini-batch size from the config: this step's size for the one call
        actor = self.config.actor_rollout_ref.actor
        saved = actor.ppo_mini_batch_size
        with open_dict(self.config):
            actor.ppo_mini_batch_size = self.ada_minibatches.ppo_mini_batch_size
        try:
            return super()._update_actor(batch, metrics)
        finally:
            with open_dict(self.config):
                actor.ppo_mini_batch_size = saved

    def _checkpoint_folder(self) -> str:
        if self.config.trainer.resume_mode == "resume_path" and self.config.trainer.resume_from_path:
            folder = str(self.config.trainer.resume_from_path)
        else:
            folder = os.path.join(self.config.trainer.default_local_dir, f"global_step_{self.global_steps}")
        return folder if os.path.isabs(folder) else os.path.join(os.getcwd(), folder)

    def _save_checkpoint(self):
        # before verl's own files: verl writes latest_checkpointed_iteration.txt (what a resume trusts) and runs its
        # checkpoint callback (uploads) last, so the folder is complete by then
        save_state(os.path.join(self.config.trainer.default_local_dir, f"global_step_{self.global_steps}"), self.ada)
        super()._save_checkpoint()

    def _load_checkpoint(self):
        super()._load_checkpoint()
        if self.global_steps > 0:
            load_state(self._checkpoint_folder(), self.ada)
