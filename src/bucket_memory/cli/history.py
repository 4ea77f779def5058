"""Commands on a memory's history: log, restore, rollback."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated

import click
import typer

from .base import TIME_HELP, Json, Url, Yes, command, confirm, emit, moment, origin, out
from .checks import checked_path, checked_version
from .running import run
from .tables import Column, Wide, age, show

if TYPE_CHECKING:
    from ..admin import MemoryAdmin
    from ..reports import Changeset
    from .output import Revision


@command()
def log(
    url: Url,
    path: Annotated[str | None, typer.Argument(help="Only changes to this file.", callback=checked_path)] = None,
    limit: Annotated[int, typer.Option(min=1, help="At most this many entries, newest first.")] = 50,
    since: Annotated[str | None, typer.Option(help=f"Only changes made since: {TIME_HELP}.")] = None,
    until: Annotated[str | None, typer.Option(help=f"Only changes made until: {TIME_HELP}.")] = None,
    wide: Wide = False,
    as_json: Json = False,
) -> None:
    """Show the retained history, newest first: who changed what, when.

    Reads back from the head only as far as it needs: --limit 3 costs a few requests however long
    the log. Example: bucket-memory log s3://my-memories/team notes/tea.md --since 2h
    """
    from .output import Revision

    start, end = (moment(since) if since else None), (moment(until) if until else None)
    found = run(lambda admin: admin.revisions(path, limit=limit, since=start, until=end), url, read_only=True)
    revisions = [
        Revision(
            version=revision.version,
            time=revision.time,
            action=revision.action,
            path=revision.path,
            other=revision.other,
            size=revision.size,
            erased=revision.erased,
            principal=revision.origin.principal_id,
            run=revision.origin.run_id,
            tool_call=revision.origin.tool_call_id,
        )
        for revision in found
    ]

    def table() -> None:
        from ..reports import short_principal

        now = datetime.now(UTC)
        columns = [
            Column("version"),
            Column("time"),
            Column("action"),
            Column("path", "fold", share=2),
            Column("by", "cut"),
            Column("run", "cut"),
            *([Column("tool call")] if wide else []),
        ]
        rows = [
            [
                revision.version,
                revision.time if wide else age(revision.time, now),
                revision.action if revision.erased is None else f"{revision.action} (erased by {revision.erased})",
                _moved(revision),
                (revision.principal or "") if wide else short_principal(revision.principal),
                revision.run or "",
                *([revision.tool_call or ""] if wide else []),
            ]
            for revision in revisions
        ]
        show(columns, rows, wide=wide)

    emit(revisions, as_json, table)


def _moved(revision: Revision) -> str:
    """The path a change made, with where a move came from or went to; * for a purge (every file)."""
    if revision.action == "moved-in":
        return f"{revision.path} <- {revision.other}"
    if revision.action == "moved-out":
        return f"{revision.path} -> {revision.other}"
    return revision.path or "*"


@command()
def restore(
    url: Url,
    path: Annotated[str, typer.Argument(help="The file to bring back.", show_default=False, callback=checked_path)],
    version: Annotated[
        str, typer.Option(help="The version to bring back (see `log URL PATH`).", callback=checked_version)
    ],
    yes: Yes = False,
    as_json: Json = False,
) -> None:
    """Make a file what it was at a version, as a new commit (itself undoable).

    When the file did not exist at that version, restoring deletes it: that is shown first and
    asked (or needs --yes off a terminal).
    Example: bucket-memory restore s3://my-memories/team notes/tea.md --version 3
    """
    from .output import Written

    changes = run(lambda admin: admin.preview_restore(path, version), url)
    at = None
    if changes.deleted:
        confirm(changes, f"Restoring {path} to version {version}", yes)
        at = changes.seq
    who = origin("restore", url)
    result = run(lambda admin: admin.restore(path, version, origin=who, at=at), url)
    said = f"deleted (it did not exist at version {version})" if result is None else f"now version {result}"
    emit(Written(path=path, version=result), as_json, lambda: out.print(f"{path}: {said}"))


@command()
def rollback(
    url: Url,
    to: Annotated[int | None, typer.Option(min=1, help="The commit to roll the whole memory back to.")] = None,
    as_of: Annotated[str | None, typer.Option("--as-of", help=f"The last commit made by then: {TIME_HELP}.")] = None,
    yes: Yes = False,
    as_json: Json = False,
) -> None:
    """Make the whole memory what it was at a commit or time, as one new commit.

    Shows every file it would write or delete first, and asks (or needs --yes off a terminal).
    Example: bucket-memory rollback s3://my-memories/team --as-of 2h --yes
    """
    from .output import Bulk

    if (to is None) == (as_of is None):
        raise click.UsageError("Give exactly one of --to SEQ or --as-of TIME.")
    when = moment(as_of) if as_of is not None else None

    async def preview(admin: MemoryAdmin) -> tuple[int, Changeset]:
        target = await admin.seq_at(when) if when is not None else to
        assert target is not None
        return target, await admin.preview_rollback(target)

    target, changes = run(preview, url)
    if not confirm(changes, f"Rolling back to commit {target}", yes):
        emit(Bulk(commit=None, written=[], deleted=[]), as_json, lambda: out.print(f"already as at commit {target}"))
        return
    who = origin("rollback", url)
    seq = run(lambda admin: admin.rollback(target, origin=who, at=changes.seq), url)
    emit(
        Bulk(commit=seq, written=list(changes.written), deleted=list(changes.deleted)),
        as_json,
        lambda: out.print(f"rolled back to commit {target} as commit {seq}"),
    )
