"""Commands on a record memory: records ls, search, add, rm."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Annotated

import typer
from a13n_harness.providers.memory import MemoryRecord

from ..admin import MemoryAdmin
from ..records import LogRecordStore
from .base import Json, Url, app, command, emit, origin, out, run
from .output import Record, Removed
from .tables import Column, Wide, age, show

records = typer.Typer(
    help="Record memories: short records recalled by similarity (ranked by BM25 here, with no embedder).",
    no_args_is_help=True,
    suggest_commands=False,  # as the app's
)
app.add_typer(records, name="records")


def _on_records[T](
    work: Callable[[LogRecordStore], Awaitable[T]], command_name: str, url: str
) -> Callable[[MemoryAdmin], Awaitable[T]]:
    return lambda admin: work(LogRecordStore(admin.store, origin=origin(f"records {command_name}", url)))


def _record(record: MemoryRecord) -> Record:
    updated = record.updated_at.isoformat().replace("+00:00", "Z") if record.updated_at else None
    return Record(id=record.id, text=record.text, updated_at=updated, score=record.score)


def _table(found: list[Record], *, scored: bool, wide: bool) -> None:
    now = datetime.now(UTC)
    columns = [Column("id"), *([Column("score")] if scored else []), Column("updated"), Column("text", "cut")]
    rows = [
        [
            record.id,
            *([f"{record.score:.3f}" if record.score is not None else ""] if scored else []),
            (record.updated_at if wide else age(record.updated_at, now)) if record.updated_at else "",
            record.text,
        ]
        for record in found
    ]
    show(columns, rows, wide=wide)


@command("ls", group=records)
def ls(
    url: Url,
    limit: Annotated[int, typer.Option(min=1, help="At most this many records, in id order.")] = 1000,
    wide: Wide = False,
    as_json: Json = False,
) -> None:
    """List the records with their ids and when they were written.

    Example: bucket-memory records ls s3://my-memories/facts
    """

    async def listed(store: LogRecordStore) -> list[MemoryRecord]:
        found: list[MemoryRecord] = []
        cursor = None
        while len(found) < limit:
            page = await store.list(limit=min(limit - len(found), 100), cursor=cursor)
            found += page.records
            if (cursor := page.next_cursor) is None:
                break
        return found

    found = [_record(record) for record in run(_on_records(listed, "ls", url), url, read_only=True)]
    emit(found, as_json, lambda: _table(found, scored=False, wide=wide))


@command("search", group=records)
def search(
    url: Url,
    query: Annotated[str, typer.Argument(help="What to look for, in words.", show_default=False)],
    limit: Annotated[int, typer.Option(min=1, help="At most this many records, best first.")] = 5,
    wide: Wide = False,
    as_json: Json = False,
) -> None:
    """Find the records closest to a query (BM25 over the texts).

    Example: bucket-memory records search s3://my-memories/facts "tea at standup"
    """
    found = [
        _record(record)
        for record in run(
            _on_records(lambda store: store.search(query, limit=limit), "search", url), url, read_only=True
        )
    ]
    emit(found, as_json, lambda: _table(found, scored=True, wide=wide))


@command("add", group=records)
def add(
    url: Url,
    text: Annotated[
        str, typer.Argument(help="The record's whole text, one self-contained statement.", show_default=False)
    ],
    as_json: Json = False,
) -> None:
    """Add one record, as one commit; prints its id.

    Example: bucket-memory records add s3://my-memories/facts "The team drinks green tea at standup."
    """
    added = _record(run(_on_records(lambda store: store.add(text), "add", url), url, new_ok=True))
    emit(added, as_json, lambda: out.print(f"added {added.id}"))


@command("rm", group=records)
def rm(
    url: Url,
    record_id: Annotated[
        str, typer.Argument(metavar="ID", help="The record's id (32 hex digits).", show_default=False)
    ],
    as_json: Json = False,
) -> None:
    """Delete one record, as one commit (its history keeps it; `bucket-memory restore` brings it back).

    Example: bucket-memory records rm s3://my-memories/facts 5f0c...
    """
    run(_on_records(lambda store: store.delete(record_id), "rm", url), url)
    emit(Removed(id=record_id), as_json, lambda: out.print(f"deleted {record_id}"))
