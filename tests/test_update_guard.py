"""Updates that would wreck the model are rolled back (weights and AdamW state), counted, and stop the run when
they keep coming; a verifier that fails on most samples stops the run with a checkpoint instead of training on
nothing until the end."""

from __future__ import annotations

import copy
import dataclasses

import pytest
import torch

from reinforce_ada.cli import main
from reinforce_ada.training import checkpoint
from reinforce_ada.training.guard import TrainingDiverged
from reinforce_ada.training.trainer import Row, Trainer, VerifierFailing
from tests.test_run_lifecycle import cfg_for, cli_flags


def rows() -> list[Row]:
    """Two rows with opposite advantages: a finite, non-zero gradient on every step."""
    return [Row([2, 5], [7, 8], [-1.0, -1.0], 1.0, 1.0), Row([2, 5], [7], [-1.0], -1.0, 1.0)]


def force(tr: Trainer, **optim) -> None:
    """Values past the config's own bounds (a library user's optimizer, or a bound too loose): the guard's case."""
    for k, v in optim.items():
        object.__setattr__(tr.cfg.optim, k, v)
        for group in tr.opt.param_groups:
            if k in group:
                group[k] = v


def weights(tr: Trainer) -> list[torch.Tensor]:
    return [p.detach().clone() for p in tr.params]


def test_a_sane_step_is_kept_and_reports_how_far_it_moved(model_dir, tmp_path):
    tr = Trainer(cfg_for(model_dir, tmp_path / "run"), tensorboard=False)
    before = weights(tr)
    m = tr.update(rows())
    assert m["skipped_update"] == 0 and "rolled_back_update" not in m
    assert 0 < m["update_ratio"] < 0.05
    assert any(not torch.equal(a, b) for a, b in zip(before, tr.params, strict=True))


def test_a_finite_blow_up_is_rolled_back_with_the_optimizer_state(model_dir, tmp_path):
    tr = Trainer(cfg_for(model_dir, tmp_path / "run"), tensorboard=False)
    assert tr.update(rows())["skipped_update"] == 0  # one good step: AdamW has moments to restore
    before, state = weights(tr), copy.deepcopy(tr.opt.state_dict()["state"])
    force(tr, weight_decay=1e30)  # multiplies every weight by 1 - lr x 1e30: finite, ruinous
    m = tr.update(rows())
    assert m["rolled_back_update"] == 1 and m["skipped_update"] == 1
    assert all(torch.equal(a, b) for a, b in zip(before, tr.params, strict=True))
    after = tr.opt.state_dict()["state"]
    assert after.keys() == state.keys()
    for k in state:
        assert float(after[k]["step"]) == float(state[k]["step"])
        for name in ("exp_avg", "exp_avg_sq"):
            assert torch.allclose(after[k][name], state[k][name], rtol=1e-4, atol=1e-12)


def test_a_rolled_back_first_step_leaves_no_optimizer_state(model_dir, tmp_path):
    tr = Trainer(cfg_for(model_dir, tmp_path / "run"), tensorboard=False)
    before = weights(tr)
    force(tr, lr=1e30)
    assert tr.update(rows())["rolled_back_update"] == 1
    assert not tr.opt.state and all(torch.equal(a, b) for a, b in zip(before, tr.params, strict=True))


def test_rollbacks_in_a_row_stop_the_run_naming_the_learning_rate(model_dir, tmp_path):
    tr = Trainer(cfg_for(model_dir, tmp_path / "run", max_rollbacks=2), tensorboard=False)
    force(tr, lr=1e30)
    tr.update(rows())
    with pytest.raises(TrainingDiverged, match=r"2 optimizer steps in a row were rolled back.*--optim.lr"):
        tr.update(rows())
    assert all(bool(torch.isfinite(p).all()) for p in tr.params)


def test_a_good_step_resets_the_rollback_count(model_dir, tmp_path):
    tr = Trainer(cfg_for(model_dir, tmp_path / "run", max_rollbacks=2), tensorboard=False)
    lr = tr.cfg.optim.lr
    for _ in range(3):
        force(tr, lr=1e30)
        assert tr.update(rows())["rolled_back_update"] == 1
        force(tr, lr=lr)
        assert tr.update(rows())["skipped_update"] == 0


def _broken(completion: str, answer: str) -> float:
    raise RuntimeError("reward service down")


def test_a_verifier_failing_on_most_samples_stops_with_a_checkpoint(model_dir, tmp_path):
    run = tmp_path / "run"
    tr = Trainer(cfg_for(model_dir, run, steps=3), tensorboard=False)
    tr.verifier = _broken
    with pytest.raises(VerifierFailing, match=r"failed on 8 of 8 samples at step 1 .*run.max_verifier_error_share=0.5"):
        tr.fit()
    assert checkpoint.latest(run).name == "step_000001"
    again = Trainer(cfg_for(model_dir, run, steps=3), tensorboard=False)  # the lock was released
    assert again.resume() and again.step == 1
    again.close()


def test_a_share_of_one_never_stops(model_dir, tmp_path):
    cfg = cfg_for(model_dir, tmp_path / "run")
    cfg = dataclasses.replace(cfg, run=dataclasses.replace(cfg.run, max_verifier_error_share=1.0))
    tr = Trainer(cfg, tensorboard=False)
    tr.verifier = _broken
    assert tr.fit()["verifier_errors"] == 8


def test_the_cli_exits_nonzero_naming_the_verifier_and_the_field(model_dir, tmp_path, capsys):
    dead = tmp_path / "dead_reward.py"
    dead.write_text("def reward(completion, answer):\n    raise RuntimeError('reward service down')\n")
    run = tmp_path / "run"
    with pytest.raises(SystemExit) as e:
        main(
            ["train", *cli_flags(model_dir), "--steps", "3", "--run-dir", str(run), "--task.verifier", f"{dead}:reward"]
        )
    err = capsys.readouterr().err
    assert e.value.code == 2 and "Traceback" not in err
    assert f"the verifier {dead}:reward failed on" in err and "--run.max_verifier_error_share" in err
    assert checkpoint.latest(run).name == "step_000001"
