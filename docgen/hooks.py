"""mkdocs hooks (`hooks:` in mkdocs.yml): pages the site builds from sources outside `docs/`.

1) The reference pages (`docgen.reference.PAGES`), rendered from the parsers and dataclasses at every build, so they
   cannot drift from the code.
2) `contributing.md` and `changelog.md`: CONTRIBUTING.md and CHANGELOG.md at the repository root, their links to
   repository files rewritten to the page of the site that covers the file, or to the file's path as code.
3) The studies' committed figures (`studies/*/results/*.png`), served at `studies/...` so the results pages show them
   as committed, not copies.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # mkdocs loads this file by path; `docgen` and `reinforce_ada` import from the root
    sys.path.insert(0, str(ROOT))

from mkdocs.structure.files import File, Files  # noqa: E402

from docgen.reference import PAGES  # noqa: E402

ROOT_PAGES = {"contributing.md": "CONTRIBUTING.md", "changelog.md": "CHANGELOG.md"}
"""Site page -> the repository file it is made from."""

SITE_EQUIVALENT = {
    "README.md": "index.md",
    "CONTRIBUTING.md": "contributing.md",
    "CHANGELOG.md": "changelog.md",
    "BENCHMARKS.md": "results/index.md",
    "studies/README.md": "results/index.md",
}


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


def on_files(files: Files, config) -> Files:
    for uri, render in PAGES.items():
        files.append(File.generated(config, uri, content=render()))
    for uri, source in ROOT_PAGES.items():
        files.append(File.generated(config, uri, content=rewrite_links((ROOT / source).read_text())))
    for png in sorted((ROOT / "studies").glob("*/results/*.png")):
        files.append(File.generated(config, png.relative_to(ROOT).as_posix(), abs_src_path=str(png)))
    return files
