"""docs/design.md is the map of the code: its layer table names every module of the package and
nothing else, its invariants each name a module that keeps it and a test that proves it, every
invariant the code cites by number is one of them, and every decision record is linked from it.
The map is read against the tree as it is, so a module added, moved or removed fails here until
the map follows."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DESIGN = ROOT / "docs" / "design.md"
DECISIONS = ROOT / "docs" / "decisions"
PACKAGE = ROOT / "src" / "bucket_memory"
MAX_LINES = 400


def section(title: str) -> str:
    """The text of the map's `## title` section, up to the next section."""
    text = DESIGN.read_text()
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else len(text)]


def table_rows(text: str) -> list[list[str]]:
    """The cells of each body row of the Markdown tables in `text`."""
    rows = []
    for line in text.splitlines():
        if line.startswith("|") and not line.startswith("| ---"):
            rows.append([cell.strip() for cell in line.strip().strip("|").split("|")])
    return rows[1:] if rows else rows


def paths_in(cell: str) -> list[str]:
    return re.findall(r"`([\w/]+\.py)`", cell)


def exists(module: str) -> bool:
    """Whether `module` (a path under the package) exists."""
    return (PACKAGE / module).is_file()


def is_module(path: Path) -> bool:
    """A module the map must name: any but an `__init__.py` that defines nothing (the folder's row
    names it)."""
    if path.name != "__init__.py":
        return True
    body = ast.parse(path.read_text()).body
    return any(isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) for node in body)


def tree_modules() -> set[str]:
    return {
        path.relative_to(PACKAGE).as_posix()
        for path in PACKAGE.rglob("*.py")
        if "__pycache__" not in path.parts and is_module(path)
    }


def layer_table_modules() -> list[str]:
    rows = table_rows(section("Layers").split("### ")[0])
    named = []
    for row in rows:
        assert len(row) == 3, f"a layer row has three cells: {row}"
        found = paths_in(row[1])
        assert len(found) == 1, f"a layer row names one module: {row[1]!r}"
        named += found
    return named


def test_the_map_is_a_map_not_an_argument() -> None:
    lines = len(DESIGN.read_text().splitlines())
    assert lines <= MAX_LINES, f"docs/design.md has {lines} lines: move argument to docs/decisions/"


def test_every_module_the_layer_table_names_exists() -> None:
    missing = [module for module in layer_table_modules() if not exists(module)]
    assert not missing, f"the layer table names modules the tree lacks: {missing}"


def test_every_module_of_the_package_is_in_the_layer_table() -> None:
    named = layer_table_modules()
    assert len(named) == len(set(named)), "a module is named twice"
    absent = sorted(tree_modules() - set(named))
    assert not absent, f"modules missing from docs/design.md's layer table: {absent}"


def invariants() -> dict[int, list[str]]:
    rows = table_rows(section("Invariants"))
    found = {int(row[0]): row for row in rows}
    assert sorted(found) == list(range(1, len(found) + 1)), "invariants are numbered 1, 2, 3, ..."
    return found


def test_every_invariant_names_a_module_that_exists() -> None:
    for number, row in invariants().items():
        modules = paths_in(row[2])
        assert modules, f"invariant {number} names no module that keeps it"
        missing = [module for module in modules if not exists(module)]
        assert not missing, f"invariant {number} names modules the tree lacks: {missing}"


def test_every_invariant_names_a_test_that_exists() -> None:
    for number, row in invariants().items():
        ids = re.findall(r"`(tests/[\w/]+\.py)::(\w+)`", row[3])
        assert ids, f"invariant {number} names no test as a pytest node id"
        for file, name in ids:
            source = ROOT / file
            assert source.is_file(), f"invariant {number}: {file} does not exist"
            assert re.search(rf"^(async )?def {name}\(", source.read_text(), re.M), (
                f"invariant {number}: {file} has no test {name}"
            )


def cited_numbers(text: str) -> set[int]:
    """The invariant numbers a text cites: "invariant 7", "invariants 3 and 4", "invariants 1, 5"."""
    numbers = set()
    for match in re.finditer(r"[Ii]nvariants? ((?:\d+(?:, | and )?)+)", text):
        numbers |= {int(n) for n in re.findall(r"\d+", match.group(1))}
    return numbers


def test_the_citation_reader_reads_every_form() -> None:
    text = "(invariant 7 of `log`) ... (invariants 3 and 4) ... (invariants 1, 5); Invariant 2:"
    assert cited_numbers(text) == {1, 2, 3, 4, 5, 7}


def test_every_invariant_the_code_cites_is_in_the_map() -> None:
    known = set(invariants())
    for path in sorted(PACKAGE.rglob("*.py")):
        if "simulation" in path.parts:
            continue  # its auditors are named, not numbered
        unknown = cited_numbers(path.read_text()) - known
        assert not unknown, f"{path.relative_to(ROOT)} cites invariants {sorted(unknown)} the map lacks"


def test_the_protocol_docstring_and_the_map_number_the_same_invariants() -> None:
    """`log/commit_log.py` states invariants 1 to 10 too; the two lists keep the same numbers."""
    doc = ast.get_docstring(ast.parse((PACKAGE / "log" / "commit_log.py").read_text())) or ""
    stated = {int(n) for n in re.findall(r"^(\d+)\. ", doc, re.M)}
    assert stated and stated <= set(invariants())


@pytest.mark.parametrize("record", sorted(DECISIONS.glob("*.md")), ids=lambda path: path.name)
def test_every_decision_record_is_linked_from_the_map(record: Path) -> None:
    assert re.fullmatch(r"\d{3}-[a-z0-9-]+\.md", record.name), "decision records are NNN-short-name.md"
    assert f"(decisions/{record.name})" in DESIGN.read_text(), f"docs/design.md does not link {record.name}"
    text = record.read_text()
    for heading in ("## Context", "## Decision"):
        assert heading in text, f"{record.name} has no {heading!r}"


def test_every_link_into_the_docs_resolves() -> None:
    """Links to docs/design.md's sections and to decision records, from every doc, name what exists."""
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), *sorted(DECISIONS.glob("*.md"))]
    headings = {
        re.sub(r"[^\w\- ]", "", line[3:].strip().lower()).replace(" ", "-")
        for line in DESIGN.read_text().splitlines()
        if line.startswith("## ")
    }
    for page in pages:
        for target in re.findall(r"\]\(([^)\s]+)\)", page.read_text()):
            if target.startswith(("http", "#", "mailto")):
                continue
            file, _, anchor = target.partition("#")
            resolved = (page.parent / file).resolve()
            assert resolved.exists(), f"{page.relative_to(ROOT)} links {target}, which does not exist"
            if resolved == DESIGN and anchor:
                assert anchor in headings, f"{page.relative_to(ROOT)} links design.md#{anchor}, no such section"
