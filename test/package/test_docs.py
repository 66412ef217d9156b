"""The references the code makes resolve inside the repository: every "EQUATIONS.md §N" to a section of
docs/EQUATIONS.md, every "seed NNN" to a paper of docs/papers.md, every docs/ link of the README to a
file; the README keeps its two quick-start commands."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SOURCES = [
    *sorted((ROOT / "ros_lnn").rglob("*.py")),
    *sorted((ROOT / "test").rglob("*.py")),
    ROOT / "README.md",
    *sorted((ROOT / "config").glob("*.yaml")),
]


def test_equation_references_resolve():
    sections = set(re.findall(r"^## §(\d+)\.", (ROOT / "docs" / "EQUATIONS.md").read_text(), re.M))
    cited = {}
    for path in SOURCES:
        for number in re.findall(r"EQUATIONS(?:\.md)?\)?[^§\n]{0,20}§(\d+)", path.read_text()):
            cited.setdefault(number, path.relative_to(ROOT))
    assert len(cited) >= 6 and set(cited) <= sections, (cited, sections)


def test_seed_numbers_name_papers():
    papers = (ROOT / "docs" / "papers.md").read_text()
    listed = set(re.findall(r"^\| (\d{3}) \|", papers, re.M))
    assert listed == {"000", "001", "002", "003", "004"}
    for path in SOURCES:
        for number in re.findall(r"\bseed (\d{3})\b", path.read_text()):
            assert number in listed, f"{path.relative_to(ROOT)}: seed {number}"


def test_readme_links_and_quick_start():
    readme = (ROOT / "README.md").read_text()
    assert "make demo" in readme and "make test" in readme
    for target in re.findall(r"\]\(((?:docs/)?[\w./-]+\.md)(?:#[\w-]+)?\)", readme):
        assert (ROOT / target).is_file(), target


def test_readme_is_a_landing_page_and_every_docs_page_is_in_the_manual():
    """A short README (what it is, install, quick start, the flows, links) and every page of docs/ in
    the Sphinx table of contents (docs/index.md), so the built manual reaches it."""
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 250
    index = (ROOT / "docs" / "index.md").read_text()
    listed = set(re.findall(r"^([\w-]+)$", index, re.M))
    pages = {p.stem for p in (ROOT / "docs").glob("*.md")} - {"index"}
    assert pages <= listed, sorted(pages - listed)
    for page in pages:
        assert f"docs/{page}.md" in readme or page in ("papers", "EQUATIONS", "studies"), page


def test_no_figure_placeholders_left():
    """Figures come from runs: a ⟨NAME⟩ placeholder written while a study ran must not outlive it."""
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        left = re.findall(r"⟨[A-Z0-9_]+⟩", path.read_text())
        assert not left, f"{path.relative_to(ROOT)}: {left}"
