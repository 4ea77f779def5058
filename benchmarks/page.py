"""The tables of docs/performance.md, each between its own pair of markers, which each bench refills,
and the results behind them in benchmarks/."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

PAGE = Path(__file__).parent.parent / "docs" / "performance.md"
RESULTS = Path(__file__).parent


def fill(section: str, tables: str) -> None:
    """Put `tables` between `<!-- section -->` and `<!-- /section -->` on the page."""
    text = PAGE.read_text()
    start, end = f"<!-- {section} -->", f"<!-- /{section} -->"
    PAGE.write_text(text[: text.index(start) + len(start)] + "\n" + tables + "\n" + text[text.index(end) :])


def publish(results: dict[str, Any], *, saved_as: str, section: str, tables: str) -> None:
    """Save a bench's results as benchmarks/`saved_as`, put its tables on the page and print them."""
    (RESULTS / saved_as).write_text(json.dumps(results, indent=2))
    fill(section, tables)
    print(tables)
