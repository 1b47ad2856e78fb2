"""The package's shape, as the README's architecture section promises it: folders in floors, no import circle inside a
folder (function-local imports count; `if TYPE_CHECKING:` ones do not), no module over 400 lines, and a strategy
config that lists no strategy's options."""

from __future__ import annotations

import ast
import tomllib
from dataclasses import fields
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = SRC / "reinforce_ada"
FLOORS = ("sampling", "simulation", "models", "engines", "tasks", "evaluation", "training")
"""Each folder imports only the folders before it; `integrations`, `bench` and `cli` sit on top of all of them."""
TOP = ("integrations", "bench", "cli")
MAX_LINES = 400


def modules() -> dict[str, Path]:
    out = {}
    for f in PACKAGE.rglob("*.py"):
        rel = f.relative_to(SRC).with_suffix("")
        out[".".join(rel.parts[:-1] if rel.name == "__init__" else rel.parts)] = f
    return out


def _type_checking(tree: ast.AST) -> set[int]:
    skip: set[int] = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.If) and "TYPE_CHECKING" in ast.unparse(n.test):
            skip.update(id(c) for c in ast.walk(n))
    return skip


def import_graph() -> dict[str, set[str]]:
    """module -> the package modules it imports (any import statement, at any depth, but `if TYPE_CHECKING:`)."""
    mods = modules()

    def resolve(name: str) -> str | None:
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name or None

    edges: dict[str, set[str]] = {m: set() for m in mods}
    for m, f in mods.items():
        tree = ast.parse(f.read_text())
        skip, is_pkg = _type_checking(tree), f.name == "__init__.py"
        for n in ast.walk(tree):
            if id(n) in skip:
                continue
            if isinstance(n, ast.Import):
                targets = [a.name for a in n.names]
            elif isinstance(n, ast.ImportFrom):
                base = n.module or ""
                if n.level:
                    parts = m.split(".") if is_pkg else m.split(".")[:-1]
                    parts = parts[: len(parts) - (n.level - 1)]
                    base = ".".join(parts + ([base] if base else []))
                targets = [f"{base}.{a.name}" for a in n.names] + [base]
            else:
                continue
            for t in targets:
                r = resolve(t)
                if r and r != m:
                    edges[m].add(r)
                    break
    return edges


def folder(module: str) -> str:
    """The package part a module belongs to: `reinforce_ada.sampling` (its sub-folders included)."""
    return ".".join(module.split(".")[:2])


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module, over the edges inside one folder (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def strong(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in edges[v]:
            if folder(w) != folder(v):
                continue
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in edges:
        if v not in index:
            strong(v)
    return out


def test_no_import_circle_inside_any_folder():
    found = circles(import_graph())
    assert not found, "import circles inside a folder: " + "; ".join(", ".join(c) for c in found)


def test_the_circle_finder_finds_a_circle():
    edges = {"reinforce_ada.x.a": {"reinforce_ada.x.b"}, "reinforce_ada.x.b": {"reinforce_ada.x.a"}}
    assert circles(edges) == [["reinforce_ada.x.a", "reinforce_ada.x.b"]]
    assert circles({"reinforce_ada.x.a": {"reinforce_ada.y.b"}, "reinforce_ada.y.b": {"reinforce_ada.x.a"}}) == []


@pytest.mark.parametrize("floor", FLOORS)
def test_each_folder_imports_only_the_folders_below_it(floor):
    below = {f"reinforce_ada.{f}" for f in FLOORS[: FLOORS.index(floor)]}
    above = {f"reinforce_ada.{f}" for f in FLOORS[FLOORS.index(floor) + 1 :] + TOP}
    wrong = sorted(
        f"{m} -> {t}"
        for m, ts in import_graph().items()
        if folder(m) == f"reinforce_ada.{floor}"
        for t in ts
        if folder(t) in above
    )
    assert not wrong, f"{floor} reaches up (it may import {sorted(below)}): {wrong}"


def test_no_module_is_over_the_size_budget():
    big = {
        str(f.relative_to(SRC)): n for f in PACKAGE.rglob("*.py") if (n := len(f.read_text().splitlines())) > MAX_LINES
    }
    assert not big, f"modules over {MAX_LINES} lines (split along the data flow): {big}"


def test_the_strategy_config_lists_no_strategy_options():
    from reinforce_ada.sampling.config import StrategyConfig

    assert [f.name for f in fields(StrategyConfig)] == ["name", "options", "seed"]


def test_the_package_imports_no_study_and_the_repository_stays_small():
    """The package holds the library; studies (`studies/`) and benchmarks live beside it and it imports neither."""
    wrong = sorted(
        f"{m} -> {t}"
        for m, ts in _absolute_imports().items()
        for t in ts
        if t.split(".")[0] in ("studies", "benchmarks")
    )
    assert not wrong, f"the package imports a study or benchmark: {wrong}"
    import shutil
    import subprocess

    root = SRC.parent
    if shutil.which("git") is None or not (root / ".git").exists():
        pytest.skip("not a git checkout")
    files = subprocess.run(["git", "ls-files"], cwd=root, capture_output=True, text=True, check=True).stdout.split()
    results = [f for f in files if "/results/" in f]
    # 0.3 tracked 2,596 result files (one per run); a study now keeps its runs in one compact records file
    assert len(results) < 150, f"{len(results)} result files: runs belong in each study's compact records file"
    assert len(files) < 800, f"{len(files)} tracked files (3,002 at 0.3, 2,596 of them results)"


def _absolute_imports() -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for m, f in modules().items():
        names = set()
        for n in ast.walk(ast.parse(f.read_text())):
            if isinstance(n, ast.Import):
                names |= {a.name for a in n.names}
            elif isinstance(n, ast.ImportFrom) and not n.level and n.module:
                names.add(n.module)
        out[m] = names
    return out


@pytest.mark.slow
def test_the_wheel_holds_the_package_and_no_study(tmp_path):
    import subprocess
    import sys
    import zipfile

    build = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(tmp_path), "."],
        cwd=SRC.parent,
        capture_output=True,
        text=True,
        timeout=600,
    )
    if build.returncode != 0:
        pytest.skip(f"no wheel could be built here: {build.stderr.strip()[-200:]}")
    (wheel,) = tmp_path.glob("*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    code = [n for n in names if n.endswith(".py")]
    assert code and all(n.startswith("reinforce_ada/") for n in code), [n for n in code if "reinforce_ada/" not in n]
    assert not [n for n in names if n.startswith(("studies/", "benchmarks/", "tests/"))]


DOCS_EXTRA = ("mkdocs", "material", "mkdocstrings")
"""Modules of the `docs` extra: the README's test command installs `dev` only, so no test module may need them to be
collected (tests/test_docs.py's site build skips without them)."""


@pytest.mark.slow
def test_the_suite_collects_without_the_docs_extra():
    """CI runs the tests before it installs the docs extra; a test module importing mkdocs, even through docgen,
    stopped the whole suite at collection once."""
    import subprocess
    import sys

    code = (
        f"import sys; sys.modules.update(dict.fromkeys({DOCS_EXTRA!r})); import pytest; "
        "sys.exit(pytest.main(['--collect-only', '-q', '-p', 'no:cacheprovider']))"
    )
    root = Path(__file__).resolve().parents[1]
    out = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]


# -- package files ----------------------------------------------------------------------------------------------------
# Issue 40: the repository ships the license pyproject names and says how to cite the paper.
ROOT = Path(__file__).parent.parent


def test_the_license_file_is_the_one_pyproject_names():
    license_text = (ROOT / "LICENSE").read_text()
    assert "Apache License" in license_text and "Version 2.0, January 2004" in license_text
    assert tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["license"] == "Apache-2.0"


def test_the_citation_file_names_the_paper():
    cff = (ROOT / "CITATION.cff").read_text()
    assert "arXiv:2510.04996" in cff and "preferred-citation:" in cff and "license: Apache-2.0" in cff
