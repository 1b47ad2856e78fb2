"""Links from repository files to the documentation site: which page of the site covers a repository file.

Kept apart from `docgen.hooks` so that it imports without mkdocs (the tests run with the `dev` extra only).
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT_PAGES = {"contributing.md": "CONTRIBUTING.md", "changelog.md": "CHANGELOG.md"}
"""Site page -> the repository file it is made from."""

SITE_EQUIVALENT = {
    "README.md": "index.md",
    "CONTRIBUTING.md": "contributing.md",
    "CHANGELOG.md": "changelog.md",
    "BENCHMARKS.md": "results/index.md",
    "studies/README.md": "results/index.md",
}


def study_figures(root: Path) -> list[str]:
    """The studies' committed figures the site serves, as paths from the repository root: every `.png` under a
    study's `results/`, a later registration's own folder (`results/<name>/`) included."""
    return [png.relative_to(root).as_posix() for png in sorted((root / "studies").glob("*/results/**/*.png"))]


def repo_link(target: str, page_dir: str = "") -> str | None:
    """The site page for a link to a repository file, relative to `page_dir`, or None when the site has none."""
    path = target.split("#")[0]
    if path.startswith("docs/"):
        site = path[len("docs/") :]
    elif path in SITE_EQUIVALENT:
        site = SITE_EQUIVALENT[path]
    elif m := re.fullmatch(r"studies/(\w+)/(README\.md)?", path):
        site = f"results/{m.group(1)}.md"
    else:
        return None
    depth = page_dir.count("/") + 1 if page_dir else 0
    return "../" * depth + site + (target[len(path) :] if "#" in target else "")


def rewrite_links(text: str, page_dir: str = "") -> str:
    """Links to repository files: to the site's page for them, else the path as code (a page outside docs/)."""

    def one(m: re.Match) -> str:
        label, target = m.group(1), m.group(2)
        if re.match(r"[a-z]+://|#|mailto:", target):
            return m.group(0)
        site = repo_link(target, page_dir)
        return f"[{label}]({site})" if site else (label if label.startswith("`") else f"`{label}`")

    return re.sub(r"\[([^\]]+)\]\(([^)\s]+)\)", one, text)
