"""The CLI reference page and the --json schemas in docs/ are what the app says today."""

from __future__ import annotations

import click
import typer
from tools.cli_docs import REFERENCE, SCHEMAS, reference, schemas

from bucket_memory.cli import app

from .helpers import CliRunner


def test_the_reference_page_matches_the_app() -> None:
    assert REFERENCE.read_text() == reference(), "run `python -m tools.cli_docs` and commit docs/cli.md"


def test_the_json_schemas_match_the_output_models() -> None:
    kept = {path.name: path.read_text() for path in SCHEMAS.glob("*.json")}
    assert kept == schemas(), "run `python -m tools.cli_docs` and commit docs/cli/schemas/"


def _commands(group: click.Group, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    found: list[tuple[str, ...]] = [path]
    for name, command in group.commands.items():
        found += _commands(command, (*path, name)) if isinstance(command, click.Group) else [(*path, name)]
    return found


def test_every_commands_help_renders_as_a_terminal_shows_it() -> None:
    """`--help` goes through rich, which reads `[...]` as markup: `init`'s `s3://bucket[/prefix]`
    made `bucket-memory init --help` fail with a MarkupError (the generated reference, made with
    click's plain formatter, never showed it)."""
    group = typer.main.get_command(app)
    assert isinstance(group, click.Group)
    for path in _commands(group):
        result = CliRunner().invoke(app, [*path, "--help"], env={"COLUMNS": "100"})
        assert result.exit_code == 0, (path, repr(result.exception))
