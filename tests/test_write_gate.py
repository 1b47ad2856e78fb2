"""One gate for every write under a run folder (`training.gate`): a folder the run writes into, replaced by a link
while it runs (the run folder, `tensorboard/`, `checkpoints/`, MLflow's store), stops the run naming it and nothing
is written where the link points; writers that are not ours get a pinned path; the package's source holds no write
that bypasses the gate."""

from __future__ import annotations

import ast
import os
import shutil
from pathlib import Path

import pytest

from reinforce_ada.errors import ConfigError
from reinforce_ada.training import checkpoint
from reinforce_ada.training.checkpoint import CheckpointError
from reinforce_ada.training.tracking import Tracker, read_metrics
from reinforce_ada.training.trainer import Trainer
from tests.helpers import train_config


def snapshot(root: Path) -> list[tuple[str, bytes]]:
    return sorted((str(p), p.read_bytes() if p.is_file() else b"") for p in [root, *root.rglob("*")])


def swap_for_link(path: Path, target: Path) -> None:
    """What a hostile process does mid-run: the folder moved away (or removed), a link to `target` in its place."""
    shutil.rmtree(path)
    path.symlink_to(target, target_is_directory=True)


def test_tensorboard_replaced_by_a_link_mid_run_stops_the_run_and_writes_nothing_there(tmp_path):
    run, outside = tmp_path / "run", tmp_path / "outside"
    outside.mkdir()
    t = Tracker(run, report_to="tensorboard")
    t.log({"step": 0, "loss": 1.0})
    swap_for_link(run / "tensorboard", outside)
    with pytest.raises(ConfigError, match=r"run/tensorboard was replaced while the run went on \(it is now a symb"):
        t.log({"step": 1, "loss": 2.0})
    t.close()
    assert list(outside.iterdir()) == []  # TensorBoard's own writer re-opened its file by path: it wrote here


def test_tensorboards_event_file_replaced_by_a_link_is_not_written_through(tmp_path):
    run, victim = tmp_path / "run", tmp_path / "victim.txt"
    victim.write_text("mine")
    t = Tracker(run, report_to="tensorboard")
    t.log({"step": 0, "loss": 1.0})
    (events,) = (run / "tensorboard").iterdir()
    events.unlink()
    events.symlink_to(victim)
    with pytest.raises(ConfigError, match=r"events\.out\.tfevents.* was replaced or removed"):
        t.log({"step": 1, "loss": 2.0})
    t.close()
    assert victim.read_text() == "mine"


def test_our_tensorboard_events_read_back_in_tensorboard(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    t = Tracker(tmp_path / "run", report_to="tensorboard")
    for step in range(3):
        t.log({"step": step, "loss": 0.5 * step, "eval_accuracy": 0.25, "active_prompts_per_round": [1, 2]})
    t.close()
    acc = EventAccumulator(str(tmp_path / "run" / "tensorboard"))
    acc.Reload()
    assert {e.step: e.value for e in acc.Scalars("train/loss")} == {0: 0.0, 1: 0.5, 2: 1.0}
    assert sorted(acc.Tags()["scalars"]) == ["eval/eval_accuracy", "train/loss"]


def test_the_run_folder_replaced_by_a_link_mid_run_stops_the_run(tmp_path):
    run, outside = tmp_path / "run", tmp_path / "outside"
    outside.mkdir()
    t = Tracker(run, report_to="none")
    t.log({"step": 0, "loss": 1.0})
    run.rename(tmp_path / "moved-away")
    run.symlink_to(outside, target_is_directory=True)
    with pytest.raises(ConfigError, match=r"run was replaced while the run went on \(it is now another folder\)"):
        t.log({"step": 1, "loss": 2.0})
    assert list(outside.iterdir()) == []


def test_a_trainer_whose_tensorboard_is_swapped_mid_run_fails_naming_it(model_dir, tmp_path):
    run, outside = tmp_path / "run", tmp_path / "outside"
    outside.mkdir()
    tr = Trainer(train_config(model_dir, run, run={"steps": 3, "save_every": 10}), tensorboard=True)

    def swap(trainer, batch):
        if trainer.step == 1:
            swap_for_link(run / "tensorboard", outside)
        return {}

    tr.probes.append(swap)
    with pytest.raises(ConfigError, match="tensorboard was replaced"):
        tr.fit()  # the CLI's exit 2 with this line; it exited 0 having written to the link's target
    assert list(outside.iterdir()) == []
    assert [m["step"] for m in read_metrics(run)] == [0, 1, 2]  # metrics.jsonl, inside the folder, keeps step 2


class _SwapsThenWrites:
    """A model whose save_pretrained, like any writer we do not own, writes by path; before it does, a hostile process
    replaces `checkpoints/` with a link."""

    def __init__(self, run: Path, outside: Path) -> None:
        self.run, self.outside = run, outside

    def save_pretrained(self, path: str) -> None:
        (self.run / "checkpoints").rename(self.run.parent / "away")
        (self.run / "checkpoints").symlink_to(self.outside, target_is_directory=True)
        Path(path).mkdir(parents=True, exist_ok=True)
        Path(path, "model.safetensors").write_bytes(b"weights")


class _Tokenizer:
    def save_pretrained(self, path: str) -> None:
        Path(path, "tokenizer.json").write_text("{}")


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="the pinned path is /proc/self/fd/N (Linux)")
def test_a_checkpoint_writer_that_is_not_ours_writes_only_into_the_folder_the_run_made(tmp_path):
    run, outside = tmp_path / "run", tmp_path / "outside"
    outside.mkdir()
    (run / "checkpoints").mkdir(parents=True)
    checkpoint.save(run, 1, {"step": 1}, _SwapsThenWrites(run, outside), _Tokenizer())
    assert list(outside.iterdir()) == []  # the pinned path (/proc/self/fd/N) names the folder the run made
    done = tmp_path / "away" / "step_000001"  # where that folder was moved to, whole and verified
    checkpoint.verify(done)
    assert (done / "model" / "model.safetensors").read_bytes() == b"weights"
    with pytest.raises(CheckpointError, match="checkpoints is a symbolic link"):
        checkpoint.save(run, 2, {"step": 2}, _SwapsThenWrites(run, outside), _Tokenizer())


class _LeavesALink:
    def __init__(self, target: Path) -> None:
        self.target = target

    def save_pretrained(self, path: str) -> None:
        Path(path, "model.safetensors").write_bytes(b"weights")
        Path(path, "extra.bin").symlink_to(self.target)


def test_a_link_left_in_a_checkpoint_by_a_writer_is_refused_at_save(tmp_path):
    secret = tmp_path / "secret"
    secret.write_text("not the run's")
    with pytest.raises(ConfigError, match=r"model/extra.bin is a symbolic link to .*secret"):
        checkpoint.save(tmp_path / "run", 1, {"step": 1}, _LeavesALink(secret), _Tokenizer())
    assert not [p for p in (tmp_path / "run" / "checkpoints").iterdir() if p.name != "latest"]  # nothing kept


def test_the_gate_walks_every_name_without_following_links(tmp_path):
    from reinforce_ada.training.gate import Folder

    outside = tmp_path / "outside"
    outside.mkdir()
    folder = Folder(tmp_path / "run")
    (tmp_path / "run" / "sub").symlink_to(outside, target_is_directory=True)
    for write in (lambda: folder.write("sub/x.json", "{}"), lambda: folder.append("sub/x.jsonl", "{}\n")):
        with pytest.raises(ConfigError, match=r"run/sub is a symbolic link to .*outside; a run folder must not hold"):
            write()
    with pytest.raises(ConfigError, match="not a path inside the run folder"):
        folder.write("../escape.txt", "x")
    with pytest.raises(ConfigError, match="not a path inside the run folder"):
        folder.write(str(outside / "abs.txt"), "x")
    assert list(outside.iterdir()) == []
    folder.write("a/b/c.txt", "deep")  # folders on the way are made, each opened without following links
    assert (tmp_path / "run" / "a" / "b" / "c.txt").read_text() == "deep"


def test_a_trackers_store_outside_the_run_folder_must_stay_the_folder_it_was(tmp_path):
    from reinforce_ada.training.trackers import Watched

    store = tmp_path / "trackio"
    store.mkdir()
    watched = Watched(store)
    watched.check()
    store.rename(tmp_path / "old")
    store.symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    (tmp_path / "elsewhere").mkdir()
    with pytest.raises(ConfigError, match="trackio .* was replaced while the run went on"):
        watched.check()


# -- no write bypasses the gate ---------------------------------------------------------------------------------
SRC = Path(__file__).resolve().parents[1] / "src" / "reinforce_ada"
SCANNED = [*sorted((SRC / "training").glob("*.py")), SRC / "cli" / "train.py", SRC / "cli" / "evaluate.py"]
WRITES = {"write_text", "write_bytes", "mkdir", "makedirs", "touch", "symlink_to", "rename", "unlink", "rmtree"}
WRITES |= {"mkdtemp", "mkstemp", "save_pretrained", "save_file", "savefig", "SummaryWriter", "copytree", "move"}
OS_WRITES = {"rename", "replace", "unlink", "remove", "mkdir", "makedirs", "symlink", "rmdir", "truncate"}
ALLOWED = {
    ("gate.py", "*"): "the gate itself",
    ("run_dir.py", "__init__"): "RunLock: <run>/.lock opened O_NOFOLLOW, held by descriptor",
    ("run_dir.py", "open_run_dir"): "the run folder itself is made (its path is the user's choice)",
    ("checkpoint.py", "write_state"): "safetensors writes by path: the pinned Folder.writer_path",
    ("checkpoint.py", "_save"): "save_pretrained into the pinned Folder.writer_path; root.rename is Folder.rename",
    ("report.py", "make_report"): "savefig into memory (io.BytesIO); the PNG is written by gate.write_file",
    ("warm_start.py", "*"): "the warm-start cache, not a run folder",
    ("train.py", "_remove_if_empty_run"): "removes a failed run's own folder, refusing links first",
    (
        "evaluate.py",
        "cmd_eval",
    ): "eval's --out and --markdown: parent folders made, the file written by gate.write_file",
}
"""Writes outside `gate.Folder` and why each is not one under a run folder or is pinned by it."""


def _writes(tree: ast.AST) -> list[tuple[str, int, str]]:
    """(function, line, call) of every call in `tree` that writes to disk by path."""
    out = []
    for fn in [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]:
        for node in ast.walk(fn):
            if not isinstance(node, ast.Call):
                continue
            f = node.func
            name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
            owner = f.value.id if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) else ""
            mode = next((a.value for a in node.args[1:2] if isinstance(a, ast.Constant)), "")
            hit = (name in WRITES and owner != "os") or (owner == "os" and name in OS_WRITES)
            hit |= name == "open" and owner == "" and isinstance(mode, str) and bool(set(mode) & set("wax+"))
            hit |= name == "open" and owner == "os" and any(
                isinstance(a, ast.Attribute) and a.attr in ("O_WRONLY", "O_RDWR", "O_CREAT")
                for a in ast.walk(node.args[1]) if len(node.args) > 1
            )  # fmt: skip
            if hit:
                out.append((fn.name, node.lineno, name))
    return out


def test_every_write_under_a_run_folder_goes_through_the_gate():
    bypass = []
    for path in SCANNED:
        for fn, line, call in _writes(ast.parse(path.read_text())):
            if (path.name, "*") not in ALLOWED and (path.name, fn) not in ALLOWED:
                bypass.append(f"{path.relative_to(SRC)}:{line} {fn}() calls {call}")
    assert not bypass, "writes that bypass training.gate.Folder (route them through it, or add the reason):\n" + (
        "\n".join(bypass)
    )


def test_the_scan_sees_a_write_by_path():
    src = "def f(p):\n    p.write_text('x')\n    open(p, 'a')\n    os.replace(p, p)\n    open(p)\n"
    assert [c for _, _, c in _writes(ast.parse(src))] == ["write_text", "open", "replace"]
