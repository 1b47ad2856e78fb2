"""reinforce-ada as a verl plugin, tested against verl's own classes on CPU (docs/verl.md says how far that goes).

Real verl pieces used here: its hydra config (`ppo_trainer.yaml` composed with our overrides), its trainer registry
and `PPOTrainerSync` constructor, its dataloader `collate_fn` and the trainer's own `_fetch_one_gen_batch`,
TensorDict rows (`tensordict_utils`), its `ReplayBuffer` base class and a real TransferQueue on a local Ray.
Simulated: the rollout (verl's agent loop needs a vLLM/SGLang server on a GPU), by `FakeAgentLoop`, which writes
trajectories, `rm_scores` and prompt status tags the way `AgentLoopWorkerTQ` does.
Run: PYTHONPATH=src /work/venv-verl/bin/python -m pytest -q tests/test_verl.py (CI has no verl: skipped).
"""

from __future__ import annotations

import json
import os
from importlib.metadata import entry_points

import numpy as np
import pytest

verl = pytest.importorskip("verl")
pytest.importorskip("transfer_queue")

import torch  # noqa: E402
from verl.utils import tensordict_utils as tu  # noqa: E402
from verl.utils.dataset.rl_dataset import collate_fn  # noqa: E402

from reinforce_ada.errors import ConfigError  # noqa: E402
from reinforce_ada.integrations.verl import (  # noqa: E402
    STATE_FILE,
    TRAINER_NAME,
    AdaPPOTrainer,
    AdaReplayBuffer,
    check_verl,
    load_state,
    save_state,
    strategy_config_from,
    write_advantages,
)
from reinforce_ada.integrations.verl_driver import ROLLOUT_N, Session, StepDriver  # noqa: E402
from reinforce_ada.sampling.config import StrategyConfig  # noqa: E402
from reinforce_ada.sampling.configure import strategy_config  # noqa: E402
from reinforce_ada.sampling.rounds import collect  # noqa: E402
from reinforce_ada.sampling.strategies import STRATEGIES, build_strategy  # noqa: E402
from reinforce_ada.types import Prompt, Sample  # noqa: E402
from tests.verl_fixtures import FakeAgentLoop, Rows, WorkerGroupStub, dataset_rows, reward  # noqa: E402


def run_driver(cfg: StrategyConfig, steps: int, batch: int) -> tuple[StepDriver, list, list]:
    """Drive StepDriver with a rollout that answers each dispatched row at once; return the dispatched rows too."""
    queue, dispatched = [], []
    driver = StepDriver(cfg, fetch_batch=Rows(gen_batch=3), dispatch=lambda rows: queue.append(rows))
    sent: dict[int, int] = {}
    trained = []
    for _ in range(steps):
        driver.begin(batch)
        while queue:
            rows = queue.pop(0)
            dispatched.append(rows)
            for i in range(len(rows)):
                uid, n, index = rows["uid"][i], rows[ROLLOUT_N][i], int(rows["index"][i])
                uid, n = getattr(uid, "data", uid), int(getattr(n, "data", n))
                sessions = []
                for s in range(n):
                    ordinal = sent.get(index, 0) + s
                    sessions.append(Session(s, reward(index, ordinal), [f"{uid}_{s}_0"], num_tokens=5))
                sent[index] = sent.get(index, 0) + n
                driver.observe(uid, sessions)
        assert driver.done()
        trained.append(driver.finish())
        sent.clear()
    return driver, trained, dispatched


class OrdinalEngine:
    """Our rounds engine with the same rewards (a prompt's samples numbered in submission order)."""

    def __init__(self):
        self.sent: dict[str, int] = {}

    def generate(self, requests):
        out = []
        for r in requests:
            for _ in range(r.k):
                ordinal = self.sent.get(r.prompt.id, 0)
                self.sent[r.prompt.id] = ordinal + 1
                out.append(Sample(r.prompt.id, reward=reward(int(r.prompt.id), ordinal), num_tokens=5))
        return out


@pytest.mark.parametrize("name", sorted(STRATEGIES))
def test_driver_matches_our_rounds_driver_for_every_strategy(name):
    """One protocol: over verl rows the strategy keeps the same groups with the same advantages as in our trainer."""
    cfg = strategy_config(name=name, seed=3)
    driver, trained, dispatched = run_driver(cfg, steps=2, batch=6)

    ref = build_strategy(cfg)
    counter = iter(range(10**6))

    def more(k):
        return [Prompt(str(i), f"question {i}", str(i)) for i in (next(counter) for _ in range(k))]

    for got in trained:
        engine = OrdinalEngine()
        want = collect(ref, engine, more(6), more_prompts=more)
        assert [g.prompt.id for g in got.batch.groups] == [g.prompt.id for g in want.groups]
        for g_got, g_want in zip(got.batch.groups, want.groups, strict=True):
            assert [s.index for s in g_got.samples] == [s.index for s in g_want.samples]
            assert g_got.pool_rewards == g_want.pool_rewards
        for a, b in zip(got.batch.advantages, want.advantages, strict=True):
            np.testing.assert_allclose(a, b)
        np.testing.assert_allclose(got.batch.weights, want.weights)
        assert got.batch.ledger.samples_generated == want.ledger.samples_generated
        # one key per kept sample, its scalar = advantage x per-prompt weight
        expected = [float(a) * float(w) for adv, w in zip(want.advantages, want.weights, strict=True) for a in adv]
        assert [got.advantage[k] for k in got.keys] == pytest.approx(expected)
        assert got.metrics["ada/samples_generated"] == want.ledger.samples_generated
    # every dispatched row asks for exactly what the strategy requested, under a uid never used before
    uids = [tu.unwrap_non_tensor_data(r["uid"][i]) for r in dispatched for i in range(len(r))]
    assert len(set(uids)) == len(uids)
    counts = [int(tu.unwrap_non_tensor_data(r[ROLLOUT_N][i])) for r in dispatched for i in range(len(r))]
    assert sum(counts) == sum(t.batch.ledger.samples_generated for t in trained)


def test_seq_paper_preset_rounds_and_memory_keyed_on_dataset_index():
    cfg = strategy_config(name="seq", n=4, samples_per_round=8, max_samples=32)
    driver, trained, dispatched = run_driver(cfg, steps=1, batch=6)
    counts = [int(tu.unwrap_non_tensor_data(r[ROLLOUT_N][i])) for r in dispatched for i in range(len(r))]
    assert set(counts) == {8}  # M per round; hard prompts come back for more rounds under fresh uids
    assert len(counts) > 6
    t = trained[0]
    assert len(t.keys) == 6 * 4  # n kept per prompt (M >= n)
    assert t.metrics["ada/rounds"] > 1
    # the pass-rate-0 prompt (index 0) is unresolved after N_max = 32 samples
    assert sum(t.batch.ledger.active_prompts_per_round) > 0
    assert t.batch.ledger.unresolved_prompts >= 1
    memory = driver.strategy.memory.state_dict()
    assert set(json.loads(json.dumps(memory))["visits"]) == {str(i) for i in range(6)}


def test_failed_sessions_count_as_zero_and_are_never_trained():
    queue = []
    driver = StepDriver(strategy_config(name="uniform", n=4), fetch_batch=Rows(3), dispatch=queue.append)
    driver.begin(3)
    rows = queue.pop(0)
    for i in range(len(rows)):
        uid = tu.unwrap_non_tensor_data(rows["uid"][i])
        sessions = [Session(s, 1.0, [f"{uid}_{s}_0"]) for s in range(4) if not (i == 0 and s == 2)]
        driver.observe(uid, sessions)
    t = driver.finish()
    assert t.metrics["ada/failed_samples"] == 1
    assert len(t.keys) == 11
    with pytest.raises(ValueError, match="was not dispatched"):
        driver.observe(uid, [])


def test_state_round_trips_through_a_checkpoint_folder(tmp_path):
    cfg = strategy_config(name="est", seed=1)
    driver, _, _ = run_driver(cfg, steps=2, batch=6)
    path = save_state(tmp_path / "global_step_2", driver)
    assert path.name == STATE_FILE and json.loads(path.read_text())["steps"] == 2
    fresh = StepDriver(cfg, fetch_batch=Rows(3), dispatch=lambda rows: None)
    assert load_state(tmp_path / "global_step_2", fresh)
    assert fresh.state_dict() == json.loads(json.dumps(driver.state_dict()))
    assert not load_state(tmp_path / "global_step_9", fresh)  # a checkpoint made without the plugin
    other = StepDriver(cfg.replace(n=2), fetch_batch=Rows(3), dispatch=lambda rows: None)
    with pytest.raises(ConfigError, match=r"\['n'\]"):
        load_state(tmp_path / "global_step_2", other)


def test_duplicate_dataset_index_is_refused():
    def same_index():
        batch = collate_fn([{**r, "index": 0} for r in dataset_rows(0, 3)])
        batch["uid"] = np.array(["a", "b", "c"], dtype=object)
        return tu.get_tensordict(batch)

    driver = StepDriver(strategy_config(name="seq"), fetch_batch=same_index, dispatch=lambda rows: None)
    with pytest.raises(ConfigError, match="extra_info.index"):
        driver.begin(3)


def test_an_untested_verl_fails_loudly_when_the_trainer_is_built(monkeypatch):
    from verl.trainer.ppo.v1.trainer_base import PPOTrainer

    check_verl()  # the installed verl is in range
    monkeypatch.setattr(verl, "__version__", "0.10.0")
    with pytest.raises(RuntimeError, match=r"verl>=0.9.1,<0.10; found verl 0.10.0"):
        check_verl()
    monkeypatch.setattr(verl, "__version__", "0.9.1")
    monkeypatch.delattr(PPOTrainer, "_fetch_one_gen_batch")
    with pytest.raises(RuntimeError, match="lacks .'PPOTrainerSync._fetch_one_gen_batch'"):
        check_verl()


# -- verl's config, trainer registry and TransferQueue (slow: importing verl's trainer stack and Ray) ----------------
@pytest.fixture(scope="module")
def compose():
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir

    folder = os.path.join(os.path.dirname(verl.__file__), "trainer", "config")

    def make(*overrides):
        with initialize_config_dir(config_dir=folder, version_base=None):
            return hydra_compose("ppo_trainer", overrides=[f"trainer.v1.trainer_mode={TRAINER_NAME}", *overrides])

    return make


PRESET = [
    "algorithm.adv_estimator=grpo",
    "+ada.strategy=seq",
    "+ada.n=4",
    "+ada.samples_per_round=8",
    "+ada.max_samples=32",
]


@pytest.mark.slow
def test_plugin_is_loaded_by_import_verl():
    names = [ep.name for ep in entry_points(group="verl.plugins")]
    if "reinforce_ada" not in names:
        pytest.skip("reinforce-ada is not pip-installed here (its verl.plugins entry point is absent)")
    from verl.trainer.ppo.v1 import get_trainer_cls

    assert get_trainer_cls(TRAINER_NAME) is AdaPPOTrainer


@pytest.mark.slow
def test_config_from_verl_hydra_overrides(compose):
    cfg = compose(*PRESET, "actor_rollout_ref.rollout.n=4")
    strategy, poll = strategy_config_from(cfg)
    o = strategy.options
    assert (strategy.name, o.n, o.samples_per_round, o.max_samples) == ("seq", 4, 8, 32)
    trainer = AdaPPOTrainer(cfg)
    assert isinstance(trainer.replay_buffer, AdaReplayBuffer) and trainer.trainer_mode == "sync"
    with pytest.raises(ConfigError, match="rollout.n=4"):
        AdaPPOTrainer(compose(*PRESET, "actor_rollout_ref.rollout.n=8"))
    with pytest.raises(ConfigError, match="unknown ada"):
        strategy_config_from(compose("+ada.strategy=seq", "+ada.samples=8"))
    with pytest.raises(ConfigError, match="ada.replay=true is not supported by the verl plugin"):
        strategy_config_from(compose("+ada.strategy=uniform", "+ada.replay=true"))
    with pytest.raises(ConfigError, match="adv_estimator=gae"):
        AdaPPOTrainer(compose(*PRESET[1:], "actor_rollout_ref.rollout.n=4"))
    with pytest.raises(ConfigError, match="enable_resource_pool"):
        AdaPPOTrainer(compose(*PRESET, "actor_rollout_ref.rollout.n=4", "reward.reward_model.enable=True"))
    with pytest.raises(ConfigError, match="filter_groups"):
        AdaPPOTrainer(compose(*PRESET, "actor_rollout_ref.rollout.n=4", "algorithm.filter_groups.enable=True"))
    with pytest.raises(ConfigError, match="use_kl_in_reward=True"):
        AdaPPOTrainer(compose(*PRESET, "actor_rollout_ref.rollout.n=4", "algorithm.use_kl_in_reward=True"))
    with pytest.raises(ConfigError, match="parameter_sync_step=2"):
        AdaPPOTrainer(
            compose(*PRESET, "actor_rollout_ref.rollout.n=4", "+trainer.v1.reinforce_ada.parameter_sync_step=2")
        )


@pytest.fixture(scope="module")
def transfer_queue():
    import ray
    import transfer_queue as tq

    ray.init(num_cpus=8, include_dashboard=False, log_to_driver=False)  # logical CPUs for TQ's actors
    tq.init()
    yield tq
    tq.close()
    ray.shutdown()


@pytest.mark.slow
def test_trainer_step_over_a_real_transfer_queue(compose, transfer_queue, capsys):
    tq = transfer_queue
    from torchdata.stateful_dataloader import StatefulDataLoader

    trainer = AdaPPOTrainer(compose(*PRESET, "actor_rollout_ref.rollout.n=4", "data.train_batch_size=6"))
    trainer.train_dataloader = StatefulDataLoader(dataset_rows(0, 12), batch_size=6, collate_fn=collate_fn)
    trainer.train_dataloader_it = None
    trainer.agent_loop_manager = FakeAgentLoop()
    trainer.global_steps = 1
    assert trainer.prepare_step() == {}
    batch, metrics = trainer.replay_buffer.sample(global_steps=1, partition_id="train", batch_size=6)
    trained = trainer.replay_buffer.last
    assert batch.keys == trained.keys and len(batch.keys) == 6 * 4
    assert metrics["ada/prompts_trained"] == 6 and metrics["ada/rounds"] > 1
    # what verl's step does with the sampler's metrics before its tracker logs them: they arrive unchanged
    from verl.trainer.ppo.v1.utils import MetricsAggregator

    aggregator = MetricsAggregator()
    aggregator.add_step_metrics(metrics, sample_count=len(batch.keys))
    logged = aggregator.get_aggregated_metrics()
    assert {k: v for k, v in logged.items() if k.startswith("ada/")} == pytest.approx(metrics)
    from verl.utils.tracking import Tracking

    Tracking(project_name="p", experiment_name="e", default_backend=["console"]).log(data=logged, step=1)
    assert "ada/samples_generated" in capsys.readouterr().out
    left = tq.kv_list("train")["train"]
    assert set(left) == set(batch.keys)  # non-kept trajectories and every prompt uid are cleared
    # the strategy's advantage x weight is what verl's actor reads, on every response token
    write_advantages(batch, trained.advantage)
    data = tq.kv_batch_get(keys=batch.keys, partition_id="train", select_fields=["advantages", "response_mask"])
    for key, adv, mask in zip(batch.keys, data["advantages"].unbind(), data["response_mask"].unbind(), strict=True):
        torch.testing.assert_close(adv, mask.float() * trained.advantage[key])
    want = [
        float(a) * float(w) for g, w in zip(trained.batch.advantages, trained.batch.weights, strict=True) for a in g
    ]
    assert sorted(trained.advantage.values()) == pytest.approx(sorted(want))
    tq.kv_clear(keys=batch.keys, partition_id="train")


@pytest.mark.slow
def test_example_config_and_gpu_script_overrides_compose_against_verl(compose, tmp_path):
    import importlib.util

    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    with initialize_config_dir(config_dir=os.path.join(root, "examples"), version_base=None):
        example = hydra_compose("verl_ada_seq")
    assert example.trainer.v1.trainer_mode == TRAINER_NAME
    strategy, poll = strategy_config_from(example)
    o = strategy.options
    assert (strategy.name, o.samples_per_round, o.max_samples, o.n, poll) == ("seq", 8, 32, 4, 0.5)
    assert isinstance(AdaPPOTrainer(example).replay_buffer, AdaReplayBuffer)

    spec = importlib.util.spec_from_file_location("verl_gpu", os.path.join(root, "benchmarks", "verl_gpu.py"))
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    # hydra refuses a key verl's config lacks (no "+"): every override of the GPU run names a real setting
    cfg = compose(*script.overrides("/models/m", str(tmp_path), str(tmp_path)))
    assert cfg.actor_rollout_ref.rollout.name == "vllm" and cfg.trainer.total_training_steps == 3
    assert strategy_config_from(cfg)[0] == strategy  # the same preset as the example
    assert isinstance(AdaPPOTrainer(cfg).replay_buffer, AdaReplayBuffer)
    script.write_data(tmp_path / "data", rows=4)
    import pandas as pd

    rows = pd.read_parquet(tmp_path / "data" / "train.parquet")
    assert list(rows.extra_info.map(lambda e: e["index"])) == [0, 1, 2, 3]
    assert any("config.json" in m for m in script.missing(str(tmp_path)))  # no model there: named, not crashed


@pytest.mark.slow
def test_strategy_state_rides_in_verls_checkpoint_and_resume(compose, tmp_path):
    from torchdata.stateful_dataloader import StatefulDataLoader

    settings = [*PRESET, "actor_rollout_ref.rollout.n=4", f"trainer.default_local_dir={tmp_path}"]
    trainer = AdaPPOTrainer(compose(*settings))
    trainer.ada, _, _ = run_driver(trainer.ada_config, steps=2, batch=6)
    trainer.actor_rollout_wg, trainer.global_steps = WorkerGroupStub(), 2
    trainer.train_dataloader = StatefulDataLoader(dataset_rows(0, 12), batch_size=6, collate_fn=collate_fn)
    trainer._save_checkpoint()  # verl's own save: actor (stubbed), data.pt, latest_checkpointed_iteration.txt
    assert (tmp_path / "global_step_2" / STATE_FILE).exists() and (tmp_path / "global_step_2" / "data.pt").exists()
    assert (tmp_path / "latest_checkpointed_iteration.txt").read_text() == "2"

    resumed = AdaPPOTrainer(compose(*settings, "trainer.resume_mode=auto"))
    resumed.actor_rollout_wg = WorkerGroupStub()
    resumed.train_dataloader = StatefulDataLoader(dataset_rows(0, 12), batch_size=6, collate_fn=collate_fn)
    resumed._load_checkpoint()  # verl finds the latest step folder; the plugin reads its state from it
    assert resumed.global_steps == 2
    assert resumed.ada.state_dict() == json.loads(json.dumps(trainer.ada.state_dict()))
    assert resumed.ada.strategy.memory.state_dict() == json.loads(json.dumps(trainer.ada.strategy.memory.state_dict()))
