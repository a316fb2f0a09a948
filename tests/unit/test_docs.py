"""The README and docs/ stay true: every relative link resolves (the file exists; an
`#anchor` names a heading of that file), every page in docs/ is listed in the README's
documentation index, and the README stays a front door (about 300 lines).  The settings
table is checked against the schema in `test_settings_schema.py`."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def prose(text: str) -> str:
    """The text outside fenced code blocks."""
    return re.sub(r"^```.*?^```", "", text, flags=re.M | re.S)


def anchors(page: Path) -> set[str]:
    """GitHub's heading anchors of a Markdown file."""
    found = set()
    for title in re.findall(r"^#{1,6} (.+)$", prose(page.read_text(encoding="utf-8")), re.M):
        slug = re.sub(r"[^\w\- ]", "", title.strip().lower()).replace(" ", "-")
        found.add(slug)
    return found


def relative_links(page: Path) -> list[str]:
    return [
        target
        for target in LINK.findall(prose(page.read_text(encoding="utf-8")))
        if not re.match(r"^[a-z][a-z0-9+.-]*:", target)  # http:, https:, mailto:
    ]


def broken_links(page: Path) -> list[str]:
    broken = []
    for target in relative_links(page):
        path_part, _, anchor = target.partition("#")
        destination = (page.parent / path_part).resolve() if path_part else page
        if not destination.exists():
            broken.append(f"{target} (no such file)")
        elif anchor and destination.suffix == ".md" and anchor not in anchors(destination):
            broken.append(f"{target} (no heading #{anchor} in {destination.name})")
    return broken


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(page):
    broken = broken_links(page)
    assert not broken, f"{page.relative_to(ROOT)}: broken links: {broken}"


def test_the_link_check_finds_broken_links(tmp_path):
    page = tmp_path / "page.md"
    (tmp_path / "other.md").write_text("# Other\n\n## A part: `x`\n")
    page.write_text("[ok](other.md#a-part-x) [gone](missing.md) [bad anchor](other.md#nothing) [web](https://x.org/y)\n")
    assert broken_links(page) == ["missing.md (no such file)", "other.md#nothing (no heading #nothing in other.md)"]


def test_every_docs_page_is_in_the_readme_index():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    index = readme[readme.index("## Documentation") :]
    index = index[: index.index("\n## ", 4)]
    listed = set(re.findall(r"\]\(docs/([\w\-]+\.md)\)", index))
    pages = {page.name for page in (ROOT / "docs").glob("*.md")}
    assert pages <= listed, f"docs pages missing from the README's documentation index: {sorted(pages - listed)}"


def test_the_readme_is_a_front_door():
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 350, f"README.md has {len(lines)} lines; reference material belongs in docs/"
    head = "\n".join(lines[:40])
    assert "make demo" in head and "make test" in head and "docs/images/vscode-ghost-text.png" in head
    assert (ROOT / "docs" / "images" / "vscode-ghost-text.png").is_file()
