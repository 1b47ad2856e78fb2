"""End-to-end check of the verl plugin on one GPU, within about 8 minutes: 3 training steps of Ada-Seq-balance.

UNRUN: written and its overrides checked against verl 0.9.1's config on CPU (tests/test_verl.py), never executed on a
GPU. What it does:
1) checks that this machine has what the run needs and stops with a list of what is missing (no internet there):
   verl 0.9.1 with TransferQueue, vLLM (verl's v1 rollout servers are vllm / sglang / trtllm only), a CUDA torch, a
   GPU, and a small instruct model in a local folder (`--model`, e.g. Qwen2.5-0.5B-Instruct, about 1 GB);
2) writes a small arithmetic data set in verl's parquet format (`data_source="openai/gsm8k"`, so verl's own gsm8k
   rule reward scores "#### <answer>", a streaming reward as the sampler needs);
3) runs `python -m verl.trainer.main_ppo` with `trainer.v1.trainer_mode=reinforce_ada` and the paper's preset
   (`+ada.strategy=seq`, M=8, N_max=32, n=4), 8 prompts a step, 3 steps, a checkpoint at step 2;
4) checks the log for the plugin's `ada/` metrics and the checkpoint for `reinforce_ada.json`, and writes
   `summary.json` (+ the full log) to `--out` (the device tool's $OUT).
None of verl, vLLM, a CUDA torch or the model fit in the 64 MiB the device tool carries: they must already be on the
GPU machine. Only this repository travels (run with PYTHONPATH=src).

    PYTHONPATH=src python -m benchmarks.verl_gpu --model /models/Qwen2.5-0.5B-Instruct --out "$OUT"
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

PRESET = ["+ada.strategy=seq", "+ada.n=4", "+ada.samples_per_round=8", "+ada.max_samples=32", "+ada.exit=balanced"]


def overrides(model: str, data_dir: str, out_dir: str, steps: int = 3, batch: int = 8) -> list[str]:
    """verl hydra overrides of the run (tests compose them against verl's real config)."""
    return [
        "trainer.use_v1=true",
        "trainer.v1.trainer_mode=reinforce_ada",
        "algorithm.adv_estimator=grpo",
        "algorithm.use_kl_in_reward=false",
        *PRESET,
        f"data.train_files={data_dir}/train.parquet",
        f"data.val_files={data_dir}/val.parquet",
        f"data.train_batch_size={batch}",
        "data.max_prompt_length=128",
        "data.max_response_length=192",
        f"actor_rollout_ref.model.path={model}",
        "actor_rollout_ref.model.use_remove_padding=false",  # no flash-attn needed
        "actor_rollout_ref.model.enable_gradient_checkpointing=true",
        "actor_rollout_ref.actor.use_kl_loss=false",
        f"actor_rollout_ref.actor.ppo_mini_batch_size={batch}",
        "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=8",
        "actor_rollout_ref.actor.optim.lr=1e-6",
        "actor_rollout_ref.rollout.name=vllm",
        "actor_rollout_ref.rollout.n=4",
        "actor_rollout_ref.rollout.tensor_model_parallel_size=1",
        "actor_rollout_ref.rollout.gpu_memory_utilization=0.4",
        "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=8",
        "trainer.n_gpus_per_node=1",
        "trainer.nnodes=1",
        f"trainer.total_training_steps={steps}",
        "trainer.save_freq=2",
        "trainer.test_freq=-1",
        "trainer.val_before_train=false",
        "trainer.logger=[console]",
        "trainer.resume_mode=disable",
        f"trainer.default_local_dir={out_dir}/ckpt",
    ]


def missing(model: str) -> list[str]:
    out = []
    for module, why in (("verl", "verl==0.9.1"), ("transfer_queue", "TransferQueue>=0.1.10"), ("vllm", "vllm")):
        if importlib.util.find_spec(module) is None:
            out.append(f"python package {why}")
    try:
        import torch

        if not torch.cuda.is_available():
            out.append(f"a CUDA device for torch {torch.__version__}")
    except ImportError:
        out.append("torch (a CUDA build)")
    if not (Path(model) / "config.json").exists():
        out.append(f"a local HF model folder at {model} (config.json, tokenizer, weights)")
    return out


def write_data(folder: Path, rows: int, seed: int = 0) -> None:
    """Arithmetic word problems in verl's RL parquet layout, scored by verl's gsm8k rule ("#### <answer>")."""
    import pandas as pd

    rng = random.Random(seed)
    folder.mkdir(parents=True, exist_ok=True)
    for split, count in (("train", rows), ("val", 16)):
        records = []
        for i in range(count):
            a, b, c = rng.randint(2, 30), rng.randint(2, 30), rng.randint(2, 9)
            question = f"A crate holds {a} apples and {b} pears; {c} crates are bought. How many fruits in all?"
            instruction = 'Let\'s think step by step and output the final answer after "####".'
            records.append(
                {
                    "data_source": "openai/gsm8k",
                    "prompt": [{"role": "user", "content": f"{question} {instruction}"}],
                    "ability": "math",
                    "reward_model": {"style": "rule", "ground_truth": str((a + b) * c)},
                    "extra_info": {"split": split, "index": i},  # the plugin's prompt memory is keyed on it
                }
            )
        pd.DataFrame(records).to_parquet(folder / f"{split}.parquet")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default=os.environ.get("MODEL_PATH", "/models/Qwen2.5-0.5B-Instruct"))
    ap.add_argument("--out", default=os.environ.get("OUT", "verl_gpu_out"))
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--timeout-s", type=int, default=460, help="wall-clock limit of the verl run")
    args = ap.parse_args()
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    summary: dict = {"model": args.model, "steps": args.steps, "missing": missing(args.model)}
    if summary["missing"]:
        (out / "summary.json").write_text(json.dumps(summary, indent=2))
        print("cannot run, missing:", *summary["missing"], sep="\n  ")
        return 2
    write_data(out / "data", rows=64)
    cmd = [sys.executable, "-m", "verl.trainer.main_ppo", *overrides(args.model, str(out / "data"), str(out))]
    env = {**os.environ, "VERL_USE_EXTERNAL_PLUGINS": "auto", "PYTHONUNBUFFERED": "1"}
    t0 = time.time()
    with open(out / "verl.log", "w") as log:
        try:
            rc = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, timeout=args.timeout_s).returncode
        except subprocess.TimeoutExpired:
            rc = "timeout"
    text = (out / "verl.log").read_text(errors="replace")
    state = out / "ckpt" / "global_step_2" / "reinforce_ada.json"
    summary.update(
        returncode=rc,
        wall_s=round(time.time() - t0, 1),
        ada_metric_lines=sum("ada/samples_generated" in line for line in text.splitlines()),
        strategy_state_saved=state.exists(),
    )
    if state.exists():
        summary["strategy_steps_in_checkpoint"] = json.loads(state.read_text())["steps"]
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    print(json.dumps(summary, indent=2))
    ok = rc == 0 and summary["ada_metric_lines"] >= args.steps and state.exists()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
