"""The CLI reference page and the --json schemas in docs/ are what the app says today."""

from __future__ import annotations

from tools.cli_docs import REFERENCE, SCHEMAS, reference, schemas


def test_the_reference_page_matches_the_app() -> None:
    assert REFERENCE.read_text() == reference(), "run `python -m tools.cli_docs` and commit docs/cli.md"


def test_the_json_schemas_match_the_output_models() -> None:
    kept = {path.name: path.read_text() for path in SCHEMAS.glob("*.json")}
    assert kept == schemas(), "run `python -m tools.cli_docs` and commit docs/cli/schemas/"
