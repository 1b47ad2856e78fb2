"""A later registration of the real-model study (e.g. SPO on SmolLM2): arms of its own (`arm_specs`), per-arm lr
sweeps (`lr_sweep_arms`), registered lrs (`fixed_lrs`) and a named result, on a tiny random Llama; bad keys named."""

from __future__ import annotations

import pytest

from studies.llm_convergence import run as lc
from studies.llm_convergence.tests.test_llm_convergence import _with_runs, argv, write_prereg


@pytest.mark.slow
def test_a_registration_with_an_arm_of_its_own_its_batch_size_and_its_own_lr_sweep(tmp_path, model_dir):
    """A later registration (e.g. SPO on SmolLM2): an arm defined by its strategy spec and prompts per step, swept on
    its own, GRPO-n4 at a registered lr, and its result named for the registration."""
    prereg = write_prereg(
        tmp_path,
        steps=1,
        **{
            "version = 1": 'version = 1\nname = "llm_spo"',
            'arms = ["grpo-n4", "seq-bal"]': 'arms = ["grpo-n4", "spo-8"]\narm_specs = { spo-8 = { strategy = '
            '"spo", batch_size = 8 } }\nlr_sweep_arms = ["spo-8"]\nfixed_lrs = { grpo-n4 = 2e-4 }',
            'arm = "seq-bal"': 'arm = "spo-8"',
        },
    )
    assert lc.main(argv(tmp_path, prereg, model_dir)) == 0
    res = _with_runs(tmp_path / "out" / "llm.json")
    sweep = [r for r in res["runs"] if r["phase"] == "sweep"]
    assert sorted((r["arm"], r["lr"]) for r in sweep) == [("spo-8", 1e-4), ("spo-8", 2e-4), ("spo-8", 4e-4)]
    assert res["lr_sweep"] == {"lr": 2e-4, "source": "registered (fixed_lrs)"}
    spo_lr = res["lr_sweeps"]["spo-8"]["lr"]
    assert res["lr_sweeps"]["spo-8"]["grid"] == [1e-4, 2e-4, 4e-4]
    main = {(r["arm"], r["seed"]): r for r in res["runs"] if r["phase"] == "main"}
    assert sorted(main) == [("grpo-n4", 0), ("grpo-n4", 1), ("spo-8", 0), ("spo-8", 1)]
    for (arm, _), r in main.items():
        assert r["lr"] == (2e-4 if arm == "grpo-n4" else spo_lr)
        assert r["spec"]["batch_size"] == (2 if arm == "grpo-n4" else 8)
        assert r["samples_per_step"] == [8.0]  # 2 prompts x 4 samples; 8 prompts x 1 sample
        assert r["spec"]["strategy"] == ("spo" if arm == "spo-8" else "uniform:n=4")
    assert res["headline"]["L1"]["arm"] == "spo-8" and set(res["analysis"]["table"]) == {"grpo-n4", "spo-8"}
    named = lc.name_outputs(lc.parse([]), "llm_spo")  # a named registration's own folders
    assert named.out == str(lc.RESULTS / "llm_spo" / "llm_spo") and named.work.endswith("runs/llm_spo")
    assert lc.parse([]).out == str(lc.RESULTS / "llm_convergence")  # the first registration's, as before


def test_each_arm_gets_its_lr_from_its_own_sweep_the_registration_or_grpo_n4():
    study = object.__new__(lc.Study)
    study.inst = {"arms": ["grpo-n4", "spo", "mopps"], "lr_sweep_arms": ["spo"], "fixed_lrs": {"grpo-n4": 4e-4}}
    study.sweep, study.sweeps = {}, {}
    study.lr_sweep = lambda arm: {"spo": {"lr": 8e-4, "edge": None}}[arm]
    assert study.lrs() == {"grpo-n4": 4e-4, "spo": 8e-4, "mopps": 4e-4}
    assert study.sweep == {"lr": 4e-4, "source": "registered (fixed_lrs)"} and study.sweeps["spo"]["lr"] == 8e-4
    study.lr_sweep = lambda arm: None  # a sweep with no finished run yet: no plan
    assert study.lrs() is None


def test_bad_registration_keys_are_named(tmp_path, model_dir):
    own = '"seq-bal", "spo-16"]\narm_specs = {{ spo-16 = {spec} }}\n{plan}targets'
    for spec, plan, match in [
        ('{ strategy = "spo", batch_size = 0 }', "", r"arm_specs.spo-16 = .* must be \{ strategy"),
        ('{ strategy = "spo", n = 2 }', "", r"arm_specs.spo-16 = .* must be \{ strategy"),
        ('{ strategy = "nope" }', "", r"arm_specs.spo-16: strategy 'nope'"),
        ('{ strategy = "spo" }', 'lr_sweep_arms = ["spo-16"]\n', r"grpo-n4's lr must be swept .* or registered"),
        ('{ strategy = "spo" }', 'lr_sweep_arms = ["dapo"]\n', r"lr plan names 'dapo', not among the arms"),
        ('{ strategy = "spo" }', "fixed_lrs = { grpo-n4 = 2.0 }\n", r"fixed_lrs.grpo-n4 = 2.0 must be an lr"),
        (
            '{ strategy = "spo" }',
            "fixed_lrs = { grpo-n4 = 4e-4 }\n",
            r"grpo-n4' is in lr_sweep_arms \(by default lr_sweep_arms = \['grpo-n4'\]\): an arm's lr is swept or fixed",
        ),
    ]:
        bad = write_prereg(tmp_path, **{'"seq-bal"]\ntargets': own.format(spec=spec, plan=plan)})
        with pytest.raises(SystemExit, match=match):
            lc.main(argv(tmp_path, bad, model_dir))
    bad = write_prereg(
        tmp_path,
        **{
            'arms = ["grpo-n4", "seq-bal"]': 'arms = ["grpo-n4", "seq-bal"]\narm_specs = '
            '{ seq-bal = { strategy = "spo" } }'
        },
    )
    with pytest.raises(SystemExit, match=r"arm_specs.seq-bal: a built-in arm"):
        lc.main(argv(tmp_path, bad, model_dir))
    with pytest.raises(SystemExit, match=r"name = 'My Study' must be a lower-case identifier"):
        lc.main(argv(tmp_path, write_prereg(tmp_path, **{"version = 1": 'version = 1\nname = "My Study"'}), model_dir))
    for line, match in [  # the long-answer keys: what is asked, what scores it, rows at once
        ('ask = "sentence"', r"ask = 'sentence'; use 'number' .* or 'working'"),
        ('verifier = "math"', r"verifier = 'math'; use 'numeric' .* or 'numeric_marked'"),
        ("micro_batch = 0", r"micro_batch = 0 must be an integer >= 1 \(default 32\)"),
    ]:
        bad = write_prereg(tmp_path, **{'"seq-bal"]\ntargets': f'"seq-bal"]\n{line}\ntargets'})
        with pytest.raises(SystemExit, match=match):
            lc.main(argv(tmp_path, bad, model_dir))


def test_the_recorded_command_is_the_one_its_user_typed(monkeypatch):
    from studies.llm_convergence import run as lc

    monkeypatch.setenv(lc.FROZEN_ENV, "ee2257ef9636")  # main ran the registered commit and added --here itself
    assert lc.parse(["--workers", "2", "--here"]).argv == ["--workers", "2"]
    monkeypatch.delenv(lc.FROZEN_ENV)  # the user typed --here: a deviation, kept in the command
    assert lc.parse(["--workers", "2", "--here"]).argv == ["--workers", "2", "--here"]
