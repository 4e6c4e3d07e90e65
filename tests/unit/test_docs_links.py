"""The README and the docs/ pages link to files and sections that exist: the README is short and points into
docs/, so a moved page or a renamed heading must fail here, not leave a newcomer at a dead link."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\]\(([^)\s]+)\)")


def anchors(markdown: str) -> set[str]:
    """GitHub's heading slugs (lower case, punctuation dropped, spaces to hyphens) and explicit ``<a id>``s."""
    text = re.sub(
        r"^ *```.*?^ *```", "", markdown, flags=re.S | re.M
    )  # '# comments' in code are not headings
    slugs = set(re.findall(r'<a id="([^"]+)"', text))
    for heading in re.findall(r"^#{1,6} +(.+?) *$", text, re.M):
        slugs.add(re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-"))
    return slugs


def test_docs_pages_exist() -> None:
    names = {p.name for p in PAGES}
    assert {"usage.md", "architecture.md", "measured.md", "scale-out.md", "security.md"} <= names


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_reaches_a_file_and_its_section(page: Path) -> None:
    broken = []
    for target in LINK.findall(page.read_text()):
        if re.match(r"[a-z]+:", target):  # https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if not file.exists():
            broken.append(f"{target}: no such file")
        elif anchor and file.suffix == ".md" and anchor not in anchors(file.read_text()):
            broken.append(f"{target}: no heading or <a id> '{anchor}' in {file.relative_to(ROOT)}")
    assert not broken, f"{page.relative_to(ROOT)} has dead links:\n" + "\n".join(broken)


def test_the_slug_rule_matches_githubs() -> None:
    assert anchors("## Why `make run` is DQN on CartPole-v1\n## Security: who can reach what\n") == {
        "why-make-run-is-dqn-on-cartpole-v1",
        "security-who-can-reach-what",
    }
