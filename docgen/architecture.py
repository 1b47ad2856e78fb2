"""The folders of the package, floor by floor, for docs/architecture.md (its `architecture` block): each folder's
`__init__` docstring (what it owns and may import), its sub-packages' first paragraphs, and the modules at the root,
in the order of `tests/test_layout.py`'s `FLOORS` and `TOP` (read from that file: the test that enforces the floors is
the one source), so the page says what the layout test checks and what each folder says of itself.
"""

from __future__ import annotations

import ast
from pathlib import Path

from docgen.sources import ROOT

PACKAGE = ROOT / "src" / "reinforce_ada"
LAYOUT_TEST = ROOT / "tests" / "test_layout.py"


def floors() -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(FLOORS, TOP) as the layout test declares them."""
    found = {}
    for node in ast.parse(LAYOUT_TEST.read_text()).body:
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            if node.targets[0].id in ("FLOORS", "TOP"):
                found[node.targets[0].id] = tuple(ast.literal_eval(node.value))
    return found["FLOORS"], found["TOP"]


def docstring(path: Path) -> str:
    return (ast.get_docstring(ast.parse(path.read_text())) or "").strip()


def first_paragraph(text: str) -> str:
    return " ".join(text.split("\n\n")[0].split())


def architecture() -> list[str]:
    low, top = floors()
    lines = ["Modules at the root, below every folder:", ""]
    for f in sorted(PACKAGE.glob("*.py")):
        if f.name not in ("__init__.py", "__main__.py"):
            lines.append(f"- `{f.name}`: {first_paragraph(docstring(f))}")
    for i, name in enumerate((*low, *top)):
        below = low[:i] if name in low else low
        stands = "the root modules only" if not below else "may import " + ", ".join(f"`{b}`" for b in below)
        where = f"floor {i + 1}" if name in low else "on top"
        lines += ["", f"### `{name}/` ({where}: {stands})", "", *docstring(PACKAGE / name / "__init__.py").splitlines()]
        subs = sorted(p.parent for p in (PACKAGE / name).rglob("__init__.py") if p.parent != PACKAGE / name)
        if subs:
            lines.append("")
            for sub in subs:
                rel = sub.relative_to(PACKAGE).as_posix()
                lines.append(f"- `{rel}/`: {first_paragraph(docstring(sub / '__init__.py'))}")
    folders = sorted(p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists())
    missing = sorted(set(folders) - set(low) - set(top))
    if missing:
        raise ValueError(f"folders the layout test places on no floor: {missing} (tests/test_layout.py FLOORS, TOP)")
    return lines
