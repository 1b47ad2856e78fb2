"""Run AdaGRPOTrainer for two steps under `accelerate launch --multi_gpu --num_processes 2` on CPU (tests/test_trl.py).

usage: accelerate launch --multi_gpu --num_processes 2 tests/trl_two_process.py OUT_DIR RUN [RUN ...]
A RUN is a strategy name (`est`, `seq`, ...), optionally with `-asymmetric`: then rank 0's completions all score 1
(its prompts retire in round 1 under exit=positive) and rank 1's all score 0 (its prompts run to the cap), so the
processes disagree on how many rounds they need; or with `-shared`: every dataset row is the same prompt, so both
processes visit it (and its in-batch duplicate) in every step. Each process writes OUT_DIR/{RUN}_rank{r}.json: its
ledgers per step (its own and the reduced one), its strategy's prompt memory, and TRL's log history. `launch` runs
this script from a test.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the launcher puts only tests/ on the path
from tests.trl_fixtures import even_length, tiny_model_and_tokenizer, tiny_prompts  # noqa: E402


def run(out: Path, spec: str) -> None:
    from reinforce_ada.integrations.trl import AdaGRPOConfig, AdaGRPOTrainer

    strategy, _, variant = spec.partition("-")
    asymmetric, shared = variant == "asymmetric", variant == "shared"
    model, tok = tiny_model_and_tokenizer()

    def reward(completions, **kwargs):
        if asymmetric:
            return [1.0 if trainer.accelerator.process_index == 0 else 0.0 for _ in completions]
        return even_length(completions)

    extra = {"exit": "positive", "samples_per_round": 2, "max_samples": 8} if asymmetric else {}
    args = AdaGRPOConfig(
        output_dir=str(out / spec),
        max_steps=2,
        per_device_train_batch_size=4,
        num_generations=2,
        max_completion_length=6,
        use_cpu=True,
        bf16=False,
        report_to="none",
        save_strategy="no",
        logging_steps=1,
        gradient_checkpointing=False,
        learning_rate=1e-2,
        seed=0,
        strategy=strategy,
        **({"budget": 9} if strategy == "est" else {}),  # est: an odd total, so rows are padded
        **extra,
    )
    dataset = tiny_prompts(16)
    if shared:
        dataset = dataset.map(lambda row: {"prompt": "<bos>1+1="})
    trainer = AdaGRPOTrainer(model=model, reward_funcs=reward, args=args, train_dataset=dataset, processing_class=tok)
    trainer.train()
    acc = trainer.accelerator
    record = {
        "rank": acc.process_index,
        "world": acc.num_processes,
        "backend": str(acc.state.backend),
        "history": trainer.ada_history,
        "memory": trainer.ada_strategy.memory.state_dict(),
        "log_history": trainer.state.log_history,
    }
    (out / f"{spec}_rank{acc.process_index}.json").write_text(json.dumps(record))


def launch(out: Path, runs: list[str], timeout: float = 240) -> dict[str, list[dict]]:
    """Run this script under `accelerate launch` with two CPU processes (gloo); each RUN's two records."""
    root = Path(__file__).resolve().parents[1]
    with socket.socket() as sock:  # a free port for the two processes' rendezvous
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    env = {
        **os.environ,
        "TRL_EXPERIMENTAL_SILENCE": "1",
        "OMP_NUM_THREADS": "1",
        "PYTHONPATH": os.pathsep.join([str(root), str(root / "src"), os.environ.get("PYTHONPATH", "")]),
        "CUDA_VISIBLE_DEVICES": "",
    }
    cmd = [sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu", "--num_processes", "2"]
    cmd += ["--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no"]
    cmd += ["--main_process_port", str(port), str(Path(__file__).resolve()), str(out), *runs]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return {name: [json.loads((out / f"{name}_rank{r}.json").read_text()) for r in (0, 1)] for name in runs}


if __name__ == "__main__":
    torch.set_num_threads(1)
    for spec in sys.argv[2:]:
        run(Path(sys.argv[1]), spec)
    # Every record is written. Leave without interpreter teardown: ending the gloo group there, or in
    # destroy_process_group, sometimes aborts a process ("terminate called without an active exception", SIGABRT) after
    # its results are on disk, and the launcher then fails the run (seen twice in CI, the second time with
    # destroy_process_group already called). The barrier keeps either rank from leaving while the other still works.
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        torch.distributed.barrier()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
