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

from benchmarks.newcomer_steps import NOT_RUN, STEPS, TRAIN, Step  # noqa: F401 (re-exported)

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"


SOURCES = ("README.md", "docs/**/*.md", "studies/README.md", "studies/*/README.md", "examples/*.py")
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
