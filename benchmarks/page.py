"""The tables of docs/performance.md, each between its own pair of markers, which each bench refills."""

from __future__ import annotations

from pathlib import Path

PAGE = Path(__file__).parent.parent / "docs" / "performance.md"


def fill(section: str, tables: str) -> None:
    """Put `tables` between `<!-- section -->` and `<!-- /section -->` on the page."""
    text = PAGE.read_text()
    start, end = f"<!-- {section} -->", f"<!-- /{section} -->"
    PAGE.write_text(text[: text.index(start) + len(start)] + "\n" + tables + "\n" + text[text.index(end) :])
