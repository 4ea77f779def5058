"""The commands that move a memory's files to and from a directory: export (the files as they are at
one commit, as plain files) and import (a directory's files, as one commit)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from .base import Json, Url, Yes, command, confirm, count, emit, origin, out, progress
from .running import run, store_errors

if TYPE_CHECKING:
    from ..admin import MemoryAdmin


@command("export")
def export_files(
    url: Url,
    directory: Annotated[Path, typer.Argument(help="An empty or new directory.", show_default=False)],
    as_json: Json = False,
) -> None:
    """Write the files, as they are at one commit, as plain files openable by the harness's DirectoryFileStore.

    Example: bucket-memory export s3://my-memories/team ./backup
    """
    from ..transfer import export_snapshot
    from .output import Exported

    if directory.exists() and (not directory.is_dir() or any(directory.iterdir())):
        raise typer.BadParameter(f"{directory} is not an empty directory; export into a new or empty one.")

    async def work(admin: MemoryAdmin) -> tuple[int, int]:
        with progress("exporting") as advance:
            return await export_snapshot(admin.store, directory, advance)

    seq, files = run(work, url, read_only=True)
    emit(
        Exported(commit=seq, files=files, directory=str(directory)),
        as_json,
        lambda: out.print(f"exported {count(range(files), 'file')} as at commit {seq} to {directory}"),
    )


@command("import")
def import_files(
    url: Url,
    directory: Annotated[
        Path, typer.Argument(exists=True, file_okay=False, help="A directory of text files.", show_default=False)
    ],
    replace: Annotated[
        bool, typer.Option(help="Also delete memory files the directory lacks (shown first; asks, or needs --yes).")
    ] = False,
    yes: Yes = False,
    as_json: Json = False,
) -> None:
    """Write a directory's files into the memory as one commit.

    Every regular UTF-8 file is read, dot-files included; version-control folders (.git, .hg, .svn),
    links and anything else that is not a regular file (a FIFO, a socket) are skipped and named, and
    --replace never deletes memory files where something was skipped. Two names that are one path in
    Unicode NFC, and files larger than a memory file may be, are refused.
    Example: bucket-memory import s3://my-memories/team ./notes
    """
    from a13n_harness.providers.memory import FileFormat

    from ..transfer import read_directory
    from .output import Bulk, SkippedPath

    with store_errors(), progress("reading") as advance:
        found = read_directory(directory, FileFormat(), advance)
    if not as_json:  # before any confirmation: what is skipped is never deleted, and the reader should know
        for skipped in found.skipped:
            out.print(f"skipped {skipped.path}: {skipped.reason}")
    who = origin("import", url)
    changes = run(
        lambda admin: admin.preview_put_files(found.files, replace=replace, keep=found.kept), url, new_ok=True
    )
    if replace and not confirm(changes, f"Importing {directory} with --replace", yes):
        seq = None
    else:
        seq = run(
            lambda admin: admin.put_files(found.files, replace=replace, origin=who, keep=found.kept, at=changes.seq),
            url,
            new_ok=True,
        )
    emit(
        Bulk(
            commit=seq,
            written=list(changes.written) if seq else [],
            deleted=list(changes.deleted) if seq else [],
            skipped=[SkippedPath(path=skipped.path, reason=skipped.reason) for skipped in found.skipped],
        ),
        as_json,
        lambda: out.print(
            f"{count(found.files, 'file')} read"
            + (f", {count(found.skipped, 'path')} skipped" if found.skipped else "")
            + ("; nothing changed" if seq is None else f"; committed as commit {seq}")
        ),
    )
