"""Ray rollout workers (`engines.ray_pool`) on a local Ray with 2 workers and the tiny random Llama: the pool keeps
the drivers' ledger, two runs with the same seed are identical, a worker killed (SIGKILL) or hung (SIGSTOP) mid-step
is restarted and the step's samples do not change, no worker left fails with a checkpoint, and a driver killed with
SIGKILL resumes to the uninterrupted run's metrics."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import signal
import threading
import time
from pathlib import Path

import pytest

ray = pytest.importorskip("ray")

from reinforce_ada.engines import local_engine  # noqa: E402
from reinforce_ada.engines.config import GenerationConfig, RolloutConfig  # noqa: E402
from reinforce_ada.engines.ray_pool import RayRolloutPool  # noqa: E402
from reinforce_ada.errors import ConfigError  # noqa: E402
from reinforce_ada.models.config import ModelConfig  # noqa: E402
from reinforce_ada.sampling.configure import strategy_config  # noqa: E402
from reinforce_ada.sampling.rounds import collect  # noqa: E402
from reinforce_ada.sampling.strategies import build_strategy  # noqa: E402
from reinforce_ada.sampling.streaming import collect_streaming  # noqa: E402
from reinforce_ada.training.config import TrainConfig, apply_overrides  # noqa: E402
from reinforce_ada.training.rollout import RolloutWorkersLost  # noqa: E402
from reinforce_ada.training.trainer import Trainer  # noqa: E402
from reinforce_ada.types import Prompt  # noqa: E402
from tests.helpers import even_length  # noqa: E402

pytestmark = pytest.mark.slow  # TRL / Ray start-up: the full suite runs these, the quick loop does not

PROMPTS = [Prompt(f"p{i}", f"<bos>{i}+{2 * i + 1}=", answer="") for i in range(12)]
ROLLOUT = RolloutConfig(workers=2, cpus_per_worker=0.25, threads=1)
"""Fractional CPUs: several pools fit the test's 2-CPU local Ray at once."""


@pytest.fixture(scope="module", autouse=True)
def local_ray():
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    yield
    ray.shutdown()


def make_pool(model_dir, tiny_llama, tok, generation: GenerationConfig, **rollout) -> RayRolloutPool:
    return RayRolloutPool(
        tiny_llama,
        tok,
        model_path=str(model_dir),
        model_cfg=ModelConfig(path=str(model_dir), threads=1, device="cpu"),
        rollout=dataclasses.replace(ROLLOUT, **rollout),
        generation=generation,
        seed=3,
    )


SEQ = strategy_config(name="seq", samples_per_round=4, max_samples=12, seed=1)
UNIFORM = strategy_config(name="uniform", n=6, seed=1)


def run(strategy_cfg, engine, streaming: bool):
    s = build_strategy(strategy_cfg)
    if streaming:
        return collect_streaming(s, engine, PROMPTS, verifier=even_length)
    return collect(s, engine, PROMPTS, verifier=even_length)


def ledger(batch) -> dict:
    m = batch.ledger.as_metrics()
    return {k: v for k, v in m.items() if not k.startswith("time_") and k not in ("cancelled_samples",)}


# -- the pool is an engine like the others ---------------------------------------------------------------------------
def test_pool_keeps_the_in_process_ledger(model_dir, tiny_llama, char_tokenizer):
    """Near-greedy sampling makes every engine draw the same completions: the pool's ledger must then be the
    in-process engine's, field for field, under both drivers (only where samples are drawn differs)."""
    gen = GenerationConfig(max_new_tokens=6, temperature=1e-6, slots=64, batch_size=64)
    pool = make_pool(model_dir, tiny_llama, char_tokenizer, gen, chunk_samples=8)
    try:
        for streaming in (False, True):
            local = local_engine(
                tiny_llama,
                char_tokenizer,
                decode="auto",
                streaming=streaming,
                slots=64,
                batch_size=64,
                seed=3,
                max_new_tokens=6,
                temperature=1e-6,
            )
            for cfg in (UNIFORM, SEQ):
                a, b = run(cfg, local, streaming), run(cfg, pool, streaming)
                assert ledger(a) == ledger(b), (cfg.name, streaming)
                assert [[s.token_ids for s in g.samples] for g in a.groups] == [
                    [s.token_ids for s in g.samples] for g in b.groups
                ]
                m = pool.step_metrics()
                assert m["worker0_samples"] > 0 and m["worker1_samples"] > 0  # both workers sampled
                assert m["worker0_samples"] + m["worker1_samples"] >= b.ledger.samples_generated
                assert m["policy_version_min"] == m["policy_version_max"] == 0 and m["worker_restarts"] == 0
                assert all(s.policy_version == 0 for g in b.groups for s in g.samples)
    finally:
        pool.close()


def test_weights_reach_every_worker_before_the_next_chunk(model_dir, tiny_llama, char_tokenizer):
    import copy

    import torch

    model = copy.deepcopy(tiny_llama)
    gen = GenerationConfig(max_new_tokens=6, temperature=1e-6, slots=64, batch_size=64)
    pool = make_pool(model_dir, model, char_tokenizer, gen)
    try:
        before = run(UNIFORM, pool, False)
        assert pool.step_metrics()["policy_version_max"] == 0
        with torch.no_grad():
            for p in model.parameters():
                p.add_(0.3 * torch.randn_like(p))
        pool.sync_weights(model)
        after = run(UNIFORM, pool, False)
        local = local_engine(
            model,
            char_tokenizer,
            decode="auto",
            streaming=False,
            slots=64,
            batch_size=64,
            seed=0,
            max_new_tokens=6,
            temperature=1e-6,
        )
        ref = run(UNIFORM, local, False)
        tokens = lambda b: [[s.token_ids for s in g.samples] for g in b.groups]  # noqa: E731
        assert tokens(after) == tokens(ref) != tokens(before)
        assert {s.policy_version for g in after.groups for s in g.samples} == {1}
        assert pool.step_metrics()["policy_version_min"] == 1
    finally:
        pool.close()


def test_lora_publishes_only_the_adapter(model_dir, char_tokenizer):
    """With LoRA the learner's trainable parameters are the adapter: only it is published, and the workers (which
    load the same frozen base) then sample exactly what the learner's model samples."""
    import torch

    from reinforce_ada.models.load import load_policy

    cfg = ModelConfig(path=str(model_dir), threads=1, device="cpu", lora_r=4)
    model, tok = load_policy(model_dir, cfg)
    gen = GenerationConfig(max_new_tokens=6, temperature=1e-6, slots=64, batch_size=64)
    pool = RayRolloutPool(model, tok, model_path=str(model_dir), model_cfg=cfg, rollout=ROLLOUT, generation=gen, seed=3)
    try:
        with torch.no_grad():
            for n, p in model.named_parameters():
                if "lora_B" in n:
                    p.add_(0.5 * torch.randn_like(p))  # a non-zero adapter changes what the model samples
        pool.sync_weights(model)
        published = ray.get(pool._weights_ref)
        assert published and all("lora_" in n for n in published)
        local = local_engine(
            model,
            tok,
            decode="auto",
            streaming=False,
            slots=64,
            batch_size=64,
            seed=0,
            max_new_tokens=6,
            temperature=1e-6,
        )
        tokens = lambda b: [[s.token_ids for s in g.samples] for g in b.groups]  # noqa: E731
        assert tokens(run(UNIFORM, pool, False)) == tokens(run(UNIFORM, local, False))
    finally:
        pool.close()


# -- determinism and faults ------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def pool(model_dir, tiny_llama, char_tokenizer):
    gen = GenerationConfig(max_new_tokens=8, temperature=1.0, slots=64, batch_size=64)
    p = make_pool(model_dir, tiny_llama, char_tokenizer, gen, chunk_samples=6, max_restarts=5)
    yield p
    p.close()


def rewind(pool: RayRolloutPool) -> None:
    """Back to the state of a fresh pool (same weights version, chunk counter 0): the next step repeats."""
    pool.load_state_dict({"version": 0, "next_chunk": 0})
    pool.step_metrics()


def samples_of(batch) -> list:
    return [(s.prompt_id, s.index, s.text, s.token_ids, s.logprobs) for g in batch.groups for s in g.samples]


def test_same_seed_same_step(pool):
    for streaming in (False, True):
        rewind(pool)
        a = run(SEQ, pool, streaming)
        rewind(pool)
        b = run(SEQ, pool, streaming)
        assert ledger(a) == ledger(b) and samples_of(a) == samples_of(b)
        assert a.ledger.samples_generated > len(PROMPTS) * SEQ.options.samples_per_round  # more than one round ran


def _fault_mid_step(pool: RayRolloutPool, sig: int) -> threading.Thread:
    """Send `sig` to worker 0's process once it has returned a chunk this step (so the fault lands mid-step)."""
    start = pool.workers[0].chunks

    def fault():
        deadline = time.time() + 60
        while pool.workers[0].chunks == start and time.time() < deadline:
            time.sleep(0.005)
        os.kill(pool.workers[0].pid, sig)

    t = threading.Thread(target=fault, daemon=True)
    t.start()
    return t


@pytest.mark.parametrize("streaming", [False, True], ids=["rounds", "streaming"])
def test_worker_killed_mid_step_is_restarted_and_the_step_is_unchanged(pool, streaming):
    rewind(pool)
    ref = run(SEQ, pool, streaming)
    assert pool.step_metrics()["worker_restarts"] == 0
    rewind(pool)
    old_pid = pool.workers[0].pid
    t = _fault_mid_step(pool, signal.SIGKILL)
    with pytest.warns(UserWarning, match="rollout worker 0 .* lost"):
        got = run(SEQ, pool, streaming)
    t.join()
    m = pool.step_metrics()
    assert m["worker_restarts"] == m["workers_lost"] == 1 and m["rollout_workers"] == 2
    assert ledger(got) == ledger(ref) and samples_of(got) == samples_of(ref)
    pool.wait_ready()
    assert pool.workers[0].pid not in (old_pid, -1)  # a new process took its place
    rewind(pool)
    assert samples_of(run(SEQ, pool, streaming)) == samples_of(ref)  # and it samples like the old one


def test_hung_worker_is_treated_as_dead(pool):
    rewind(pool)
    ref = run(SEQ, pool, True)
    rewind(pool)
    pool.timeout_s = 3.0
    t = _fault_mid_step(pool, signal.SIGSTOP)  # the process stops answering but stays alive
    try:
        with pytest.warns(UserWarning, match="hung"):
            got = run(SEQ, pool, True)
    finally:
        pool.timeout_s = ROLLOUT.timeout_s
        t.join()
    assert pool.step_metrics()["worker_restarts"] == 1
    assert ledger(got) == ledger(ref) and samples_of(got) == samples_of(ref)
    pool.wait_ready()


# -- the trainer -----------------------------------------------------------------------------------------------------
def train_cfg(model_dir: Path, run_dir: Path, **rollout) -> TrainConfig:
    return apply_overrides(
        TrainConfig(),
        {
            "model": {"path": str(model_dir), "threads": 1},
            "task": {"train_size": 256, "eval_size": 4},
            "generation": {"max_new_tokens": 4},
            "run": {"run_dir": str(run_dir), "steps": 3, "batch_size": 6, "eval_every": 0, "progress": False},
            "strategy": {"samples_per_round": 4, "max_samples": 8},
            "rollout": {"workers": 2, "cpus_per_worker": 0.25, "chunk_samples": 8, **rollout},
        },
        "test",
    )


def steady(m: dict) -> str:
    """Metrics that must repeat exactly (everything but wall times and evaluation), as JSON with NaN as null."""
    keep = {k: v for k, v in m.items() if not k.startswith(("time_", "eval")) and not k.endswith("_busy_s")}
    keep = {k: None if isinstance(v, float) and v != v else v for k, v in keep.items()}  # the tracker writes null
    return json.dumps({k: v for k, v in keep.items() if k != "worker_busy_imbalance"}, sort_keys=True)


def test_trainer_runs_repeat_and_a_lost_cluster_saves_a_checkpoint(model_dir, tmp_path):
    a = Trainer(train_cfg(model_dir, tmp_path / "a", max_restarts=0), tensorboard=False)
    a.verifier = even_length  # a reward the random policy earns: every step updates the weights
    try:
        a.fit()
    finally:
        a.engine.close()
    lines = [json.loads(x) for x in (tmp_path / "a" / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in lines] == [0, 1, 2, 3]
    assert all(m["worker0_samples"] > 0 and m["worker1_samples"] > 0 for m in lines[1:])
    assert [m["policy_version_max"] for m in lines[1:]] == [0, 1, 2]  # step s sampled with the weights of step s-1
    assert all(m["skipped_update"] == 0 and m["loss"] != 0 for m in lines[1:])

    b = Trainer(train_cfg(model_dir, tmp_path / "b", max_restarts=0), tensorboard=False)
    b.verifier = even_length
    try:
        got = [b.train_step(), b.train_step()]
        for m, want in zip(got, lines[1:3], strict=True):
            assert steady(m) == steady(want)
        for pid in b.engine.worker_pids():
            os.kill(pid, signal.SIGKILL)
        with pytest.raises(RolloutWorkersLost, match="no worker left.*--resume"), pytest.warns(UserWarning):
            b.fit()
    finally:
        b.engine.close()
    saved = sorted(p.name for p in (tmp_path / "b" / "checkpoints").glob("step_*"))
    assert saved == ["step_000002"]

    c = Trainer(train_cfg(model_dir, tmp_path / "b", max_restarts=0), tensorboard=False)
    c.verifier = even_length
    try:
        assert c.resume() and c.step == 2
        assert steady(c.train_step()) == steady(lines[3])  # the lost step, repeated exactly
    finally:
        c.engine.close()


def test_rollout_config_errors_name_the_field(capsys):
    with pytest.raises(ConfigError, match="rollout.workers"):
        RolloutConfig(workers=-1)
    with pytest.raises(ConfigError, match="rollout.address.*ray://"):
        RolloutConfig(address="10.0.0.1:6379")
    with pytest.raises(ConfigError, match=r"rollout.engine.*\['hf', 'vllm'\]"):
        RolloutConfig(engine="sglang")
    with pytest.raises(ConfigError, match="rollout.timeout_s"):
        RolloutConfig(timeout_s=0)
    from reinforce_ada.cli import main

    with pytest.raises(SystemExit) as e:
        main(["train", "--rollout-workers", "-1"])
    assert e.value.code == 2 and "rollout.workers=-1" in capsys.readouterr().err
    with pytest.raises(ConfigError, match="at least one worker"):
        RayRolloutPool(None, None, model_path="", model_cfg=None, rollout=RolloutConfig(), generation=None)


def test_workers_the_cluster_cannot_hold_fail_at_once(model_dir, tiny_llama, char_tokenizer):
    """The test's local Ray has 2 CPUs: a worker asking for 8 would be queued forever; it is refused at start."""
    gen = GenerationConfig(max_new_tokens=4)
    with pytest.raises(ConfigError, match=r"rollout.cpus_per_worker=8.*2 CPUs"):
        make_pool(model_dir, tiny_llama, char_tokenizer, gen, workers=1, cpus_per_worker=8)


@pytest.mark.slow
def test_driver_sigkill_then_resume_matches_uninterrupted_run(model_dir, tmp_path):
    """The CLI with 2 rollout workers, each run starting its own local Ray: a driver killed with SIGKILL and resumed
    from its checkpoint repeats the uninterrupted run's steps exactly."""
    env = {**os.environ, "PYTHONHASHSEED": "0", "OMP_NUM_THREADS": "1"}
    common = [
        *("--model.path", str(model_dir), "--model.threads", "1", "--task.train_size", "256", "--task.eval_size", "4"),
        *("--generation.max_new_tokens", "4", "--batch-size", "6", "--eval-every", "0", "--save-every", "2"),
        *("--run.progress", "false", "--samples-per-round", "4", "--max-samples", "8"),
        *("--rollout-workers", "2", "--rollout.cpus_per_worker", "0.5", "--rollout.local_cpus", "2"),
        *("--task.verifier", "tests.helpers:even_length"),
        *("--optim.warmup_steps", "1"),  # capped at a fifth of run.steps: 1 in both the 6-step and the long run
    ]
    ref = _run_cli([*common, "--steps", "6", "--run-dir", str(tmp_path / "ref")], env)
    assert ref.wait(timeout=300) == 0, ref.stderr.read().decode()[-3000:]
    killed = _run_cli([*common, "--steps", "100000", "--run-dir", str(tmp_path / "k")], env)
    metrics = tmp_path / "k" / "metrics.jsonl"
    deadline = time.time() + 240
    while time.time() < deadline:
        if metrics.exists() and len(metrics.read_text().splitlines()) >= 4:  # eval line + 3 steps: step 2 is saved
            break
        time.sleep(0.02)
    import psutil

    # the local Ray the driver started (GCS, raylet, agents, workers): a SIGKILLed driver leaves some of it behind
    its_ray = psutil.Process(killed.pid).children(recursive=True)
    killed.send_signal(signal.SIGKILL)
    assert killed.wait(timeout=30) == -signal.SIGKILL
    for p in its_ray:
        with contextlib.suppress(psutil.NoSuchProcess):
            p.kill()
    resumed = _run_cli(["--resume", str(tmp_path / "k"), "--steps", "6", "--run.progress", "false"], env)
    assert resumed.wait(timeout=300) == 0, resumed.stderr.read().decode()[-3000:]

    def load(d: str) -> list[str]:
        return [steady(json.loads(x)) for x in (tmp_path / d / "metrics.jsonl").read_text().splitlines()]

    a, b = load("ref"), load("k")
    assert len(b) == 7 and a[1:] == b[1:]


def _run_cli(args: list[str], env: dict):
    import subprocess
    import sys

    return subprocess.Popen(
        [sys.executable, "-m", "reinforce_ada.cli", "train", *args],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
