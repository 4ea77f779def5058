"""Commands on a record memory: records ls, search, add, rm, erase, doctor."""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated, cast

import click
import typer

from ..records.ranking import RANKINGS, Ranking
from .base import Json, Url, Yes, app, command, emit, err, named, out
from .erase import DryRun
from .failures import EXIT_PROBLEMS
from .running import run
from .tables import Column, Wide, age, show

if TYPE_CHECKING:
    from a13n_harness.providers.memory import MemoryRecord

    from ..admin import MemoryAdmin
    from ..records.store import LogRecordStore
    from .output import Record, Vectors

if TYPE_CHECKING:
    from pydantic_ai import Embedder

records = typer.Typer(
    help="Record memories: short records recalled by similarity (BM25 over the texts, and with --embedder "
    "by meaning too).",
    no_args_is_help=True,
    suggest_commands=False,  # as the app's
)
app.add_typer(records, name="records")

EmbedderName = Annotated[
    str | None,
    typer.Option(
        "--embedder",
        metavar="PROVIDER:MODEL",
        help="The embedding model: local (WordLlama in this process, offline; the local-embeddings extra), as "
        "pydantic-ai names it (openai:text-embedding-3-small, google-gla:gemini-embedding-001, ...) with its "
        "credentials in the environment (OPENAI_API_KEY, ...), or module:attribute naming a model of your own (an "
        "Embedder, an EmbeddingModel, or what makes one; the module is imported). Give the one the memory's "
        "writers use.",
        show_default=False,
    ),
]


def _on_records[T](
    work: Callable[[LogRecordStore], Awaitable[T]],
    command_name: str,
    url: str,
    embedder: Embedder | None = None,
    ranking: Ranking = "hybrid",
) -> Callable[[MemoryAdmin], Awaitable[T]]:
    from ..records.store import LogRecordStore

    async def on(admin: MemoryAdmin) -> T:
        # Only commands that commit name their caller (a search writes vectors back under its own origin).
        who = await named(f"records {command_name}", url) if command_name in _COMMITTING else None
        return await work(LogRecordStore(admin.store, embedder=embedder, ranking=ranking, origin=who))

    return on


_COMMITTING = frozenset({"add", "rm"})


def made_embedder(name: str | None) -> Embedder | None:
    """The embedder a `--embedder` names, made now, so that a name this installation cannot use is
    a usage error with the provider's reason (unknown, its package or its key missing)."""
    if name is None:
        return None
    from ..records.embedding import embedder_named

    try:
        return embedder_named(name)
    except Exception as error:  # pydantic-ai's reasons are ValueError, UserError and ImportError, each with advice
        raise typer.BadParameter(
            f"{name[:100]!r} cannot be used here: {str(error)[:300]}", param_hint="--embedder"
        ) from None


def _record(record: MemoryRecord) -> Record:
    from .output import Record

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
    embedder: EmbedderName = None,
    ranking: Annotated[
        str,
        typer.Option(
            click_type=click.Choice(RANKINGS),
            help="With --embedder, how to rank: hybrid (BM25 and the vectors fused by score), vectors, or bm25.",
        ),
    ] = "hybrid",
    as_json: Json = False,
) -> None:
    """Find the records closest to a query: by BM25 over the texts, and with --embedder by meaning
    too (records stored without a vector of that model are embedded for this search only: the
    command only reads). Exits 1 when no record is found, as grep does.

    Example: bucket-memory records search s3://my-memories/facts "tea" --embedder openai:text-embedding-3-small
    """

    if ranking == "vectors" and embedder is None:
        raise typer.BadParameter("vectors needs --embedder", param_hint="--ranking")
    made = made_embedder(embedder)
    work = _on_records(lambda store: store.search(query, limit=limit), "search", url, made, cast(Ranking, ranking))
    recalled = run(work, url, read_only=True)
    if recalled.notice is not None:  # the embedder failed: said on stderr, the records ranked by words still shown
        err.print(f"warning: ranked by words alone: {recalled.notice.reason}")
    found = [_record(record) for record in recalled]

    def human() -> None:
        if found:
            _table(found, scored=True, wide=wide)
        else:  # not an empty table: words, on stderr (stdout stays empty for a script)
            err.print(f"no record matches {query[:80]!r}")

    emit(found, as_json, human)
    if not found:  # as grep: a script can tell a search that found nothing
        raise typer.Exit(EXIT_PROBLEMS)


@command("add", group=records)
def add(
    url: Url,
    text: Annotated[
        str, typer.Argument(help="The record's whole text, one self-contained statement.", show_default=False)
    ],
    embedder: EmbedderName = None,
    as_json: Json = False,
) -> None:
    """Add one record, as one commit; prints its id. With --embedder the record carries its vector.

    Example: bucket-memory records add s3://my-memories/facts "The team drinks green tea at standup."
    """
    made = made_embedder(embedder)
    added = _record(run(_on_records(lambda store: store.add(text), "add", url, made), url, new_ok=True))
    emit(added, as_json, lambda: out.print(f"added {added.id}"))


# A record's id as LogRecordStore.full_id takes one: 4 to 32 of its hex digits, in any case.
_ID = re.compile(r"[0-9a-f]{4,32}")


def _checked_id(value: str) -> str:
    """An id that cannot name a record, refused as the command line's mistake (exit 2) before the
    memory is read: a record not found is exit 3."""
    if _ID.fullmatch(value.strip().lower()) is None:
        raise typer.BadParameter(f"{value[:80]!a} is not a record id: give 4 to 32 of its hex digits, such as 5f0c.")
    return value


@command("rm", group=records)
def rm(
    url: Url,
    record_id: Annotated[
        str,
        typer.Argument(
            metavar="ID",
            help="The record's id, or its first 4 or more hex digits if no other starts so.",
            show_default=False,
            callback=_checked_id,
        ),
    ],
    as_json: Json = False,
) -> None:
    """Delete one record, as one commit (its history keeps it; `bucket-memory restore` brings it back).

    Example: bucket-memory records rm s3://my-memories/facts 5f0c
    """
    from .output import Removed

    async def removed(store: LogRecordStore) -> str:
        whole = await store.full_id(record_id)
        await store.delete(whole)
        return whole

    whole = run(_on_records(removed, "rm", url), url)
    emit(Removed(id=whole), as_json, lambda: out.print(f"deleted {whole}"))


@command("erase", group=records)
def erase(
    url: Url,
    record_id: Annotated[
        str,
        typer.Argument(
            metavar="ID",
            help="The record's id, or its first 4 or more hex digits if no other live record's start so; "
            "a deleted record by its whole id.",
            show_default=False,
            callback=_checked_id,
        ),
    ],
    dry_run: DryRun = False,
    yes: Yes = False,
    as_json: Json = False,
) -> None:
    """Erase every text a record ever had, from the memory, its history and the bucket's old versions,
    for good; as `bucket-memory erase` does for a file (shown first, then asked).

    Example: bucket-memory records erase s3://my-memories/facts 5f0c --dry-run
    """
    from ..records.store import LogRecordStore
    from .erase import erasing, report

    erased = erasing(
        url, lambda admin: LogRecordStore(admin.store).preview_erase(record_id), "records erase", dry_run, yes
    )
    emit(erased, as_json, lambda: report(erased))


@command("doctor", group=records)
def doctor(url: Url, as_json: Json = False) -> None:
    """Show which embedding models have vectors of the records, and name the records whose text a
    model refused (searched by words alone; exit 1 when there are any). The command only reads.

    Example: bucket-memory records doctor s3://my-memories/facts
    """
    from .output import Vectors

    found = run(_on_records(lambda store: store.census(), "doctor", url), url, read_only=True)
    shown = Vectors.of(found)
    emit(shown, as_json, lambda: _census(shown))
    if any(model.refused for model in shown.models):
        raise typer.Exit(EXIT_PROBLEMS)


def _census(shown: Vectors) -> None:
    out.print(f"{shown.records} records; {shown.without} with no vector (the next search with a model embeds them)")
    for model in shown.models:
        size = f" ({model.dimensions} dimensions)" if model.dimensions else ""
        out.print(f"{model.model}{size}: {model.vectors} with a vector, {len(model.refused)} refused")
        for found, reason in list(zip(model.refused, model.reasons, strict=True))[:20]:
            out.print(f"  refused {found}" + (f": {reason}" if reason else ""))
        if len(model.refused) > 20:
            out.print(f"  and {len(model.refused) - 20} more (--json lists them all)")
    if any(model.refused for model in shown.models):
        out.print(
            "A refused record is searched by words alone. Shorten or split its text (records rm, then records add) "
            "for the model to embed it."
        )
