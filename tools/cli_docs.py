"""Write the CLI reference (docs/cli.md) and the JSON Schemas of --json output (docs/cli/schemas/)
from the app itself: `python -m tools.cli_docs`. A test fails when either is out of date."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click
import typer.main

from bucket_memory.cli import app
from bucket_memory.cli.base import URL_FORMS
from bucket_memory.cli.failures import EXIT_CODES
from bucket_memory.cli.output import OUTPUTS, failure_schema, schema

DOCS = Path(__file__).parent.parent / "docs"
REFERENCE = DOCS / "cli.md"
SCHEMAS = DOCS / "cli" / "schemas"


def reference() -> str:
    """The reference page: every command, its usage, arguments and options, from the app."""
    group = typer.main.get_command(app)
    assert isinstance(group, click.Group)
    context = click.Context(group, info_name="bucket-memory")
    lines = [
        "# Command-line reference",
        "",
        "Generated from the app by `python -m tools.cli_docs`; `tests/test_cli_reference.py` keeps it in sync.",
        "",
        f"URLs: {URL_FORMS}. Every command that opens a store also takes `--profile`, `--region`,",
        "`--endpoint-url` (S3), `--project` (GCS) and `--principal` (who changes are attributed to);",
        "the standard environment (`AWS_PROFILE`, `AWS_ENDPOINT_URL`, `STORAGE_EMULATOR_HOST`, ...) works as well.",
        "`bucket-memory --version` prints the version; `--install-completion` installs shell completion.",
        "",
        " ".join(EXIT_CODES.split()),
        "",
        'With `--json`, a command that fails prints `{"error": {"code": ..., "message": ..., "hint": ...}}` on',
        "stdout instead of text on stderr, with the same exit code, whatever failed (the command line included):",
        "[cli/schemas/error.json](cli/schemas/error.json) describes it and lists the codes.",
        "",
    ]
    for name, command, parent in _commands(group, context):
        sub = click.Context(command, info_name=name.rpartition(" ")[2], parent=parent)
        lines += [f"## `{name}`", "", (command.help or "").strip(), "", "```", command.get_usage(sub), "```", ""]
        rows = [
            (
                " / ".join(f"`{option}`" for option in [*parameter.opts, *parameter.secondary_opts])
                if isinstance(parameter, click.Option)
                else f"`{parameter.human_readable_name}`",
                " ".join((getattr(parameter, "help", None) or "").split()),
            )
            for parameter in command.params
            if getattr(parameter, "rich_help_panel", None) != "Cloud" and parameter.name != "help"
        ]
        lines += ["| argument or option | meaning |", "| --- | --- |"]
        lines += [f"| {name_} | {meaning.replace('|', '\\|')} |" for name_, meaning in rows]
        cloud = [
            f"`{parameter.opts[0]}`"
            for parameter in command.params
            if getattr(parameter, "rich_help_panel", None) == "Cloud" and isinstance(parameter, click.Option)
        ]
        if cloud:
            lines.append(f"| {' '.join(cloud)} | the cloud options, as the top of this page says |")
        key = name.replace(" ", "-")
        if key in OUTPUTS:
            lines += ["", f"`--json` prints what [cli/schemas/{key}.json](cli/schemas/{key}.json) describes."]
        lines.append("")
    return "\n".join(lines)


def _commands(group: click.Group, context: click.Context) -> list[tuple[str, click.Command, click.Context]]:
    """Every command with its full name (`records ls` for one of a group) and its parent's context."""
    found: list[tuple[str, click.Command, click.Context]] = []
    for name in group.list_commands(context):  # in the order --help lists them
        command = group.commands[name]
        if isinstance(command, click.Group):
            inner = click.Context(command, info_name=name, parent=context)
            found += [(f"{name} {sub}", command.commands[sub], inner) for sub in command.list_commands(inner)]
        else:
            found.append((name, command, context))
    return found


def schemas() -> dict[str, str]:
    made = {f"{command}.json": json.dumps(schema(command), indent=2) + "\n" for command in OUTPUTS}
    return {**made, "error.json": json.dumps(failure_schema(), indent=2) + "\n"}


def main() -> None:
    SCHEMAS.mkdir(parents=True, exist_ok=True)
    for name, text in schemas().items():
        (SCHEMAS / name).write_text(text)
    REFERENCE.write_text(reference())
    sys.stdout.write(f"wrote {REFERENCE} and {len(OUTPUTS) + 1} schemas in {SCHEMAS}\n")


if __name__ == "__main__":
    main()
