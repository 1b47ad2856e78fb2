"""mkdocs hooks (`hooks:` in mkdocs.yml): pages the site builds from sources outside `docs/`.

1) The reference pages (`docgen.reference.PAGES`), rendered from the parsers and dataclasses at every build, so they
   cannot drift from the code, and one page per registered strategy (`docgen.strategies`), added to the nav under
   Reference.
2) `contributing.md` and `changelog.md`: CONTRIBUTING.md and CHANGELOG.md at the repository root, their links to
   repository files rewritten to the page of the site that covers the file, or to the file's path as code.
3) The studies' committed figures (`docgen.links.study_figures`), served at `studies/...` so the results pages show
   them as committed, not copies.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # mkdocs loads this file by path; `docgen` and `reinforce_ada` import from the root
    sys.path.insert(0, str(ROOT))

from mkdocs.structure.files import File, Files  # noqa: E402

from docgen import strategies  # noqa: E402
from docgen.links import ROOT_PAGES, rewrite_links, study_figures  # noqa: E402
from docgen.reference import PAGES  # noqa: E402


def on_config(config):
    for section in config["nav"]:
        if isinstance(section, dict) and "Reference" in section:
            section["Reference"].append({"Strategies": strategies.nav()})
    return config


def on_files(files: Files, config) -> Files:
    if str(ROOT) not in sys.path:  # a plugin's config step may have reset the path; the strategy pages read `studies`
        sys.path.insert(0, str(ROOT))
    for uri, render in {**PAGES, **strategies.pages()}.items():
        files.append(File.generated(config, uri, content=render()))
    for uri, source in ROOT_PAGES.items():
        files.append(File.generated(config, uri, content=rewrite_links((ROOT / source).read_text())))
    for png in study_figures(ROOT):
        files.append(File.generated(config, png, abs_src_path=str(ROOT / png)))
    return files
