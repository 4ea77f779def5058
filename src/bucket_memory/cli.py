"""The `bucket-memory` command: look after a memory at an s3://, gs://, file:// URL or a plain path.

Exit codes: 0 done; 1 `verify` or `doctor` found a problem, or a change was declined; 2 the
command line was wrong (or a change needs --yes off a terminal); 3 the store refused or failed
(the message says why and what to do); 4 no memory at the URL (nothing was ever written there).
"""

from __future__ import annotations

import asyncio
import difflib
import getpass
import json
import sys
from collections.abc import Awaitable, Callable, Iterator, Sequence, Sized
from contextlib import contextmanager
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

import typer
from a13n_harness.providers.memory import FileFormat, MemoryStoreError, Origin
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn
from rich.table import Table
from rich.text import Text

from .admin import Changeset, MemoryAdmin
from .connect import open_store
from .head import deleted
from .store import LogFileStore
from .transfer import export_snapshot, read_directory

app = typer.Typer(
    name="bucket-memory",
    help="Look after agent file memories kept in S3, GCS or a local directory.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
# Paths, texts and messages come from the memory: printed literally, never read as rich markup.
out = Console(soft_wrap=True, markup=False, highlight=False)
err = Console(stderr=True, soft_wrap=True, markup=False, highlight=False)

Url = Annotated[str, typer.Argument(help="s3://bucket/prefix, gs://bucket/prefix, file:///path or a path")]
Json = Annotated[bool, typer.Option("--json", help="Print JSON for scripts.")]
EXIT_PROBLEMS, EXIT_USAGE, EXIT_STORE, EXIT_NO_MEMORY = 1, 2, 3, 4
Yes = Annotated[bool, typer.Option("--yes", "-y", help="Make the changes without asking (needed off a terminal).")]
_LISTED = 20


def _origin(command: str) -> Origin:
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = None
    return Origin(run_id=f"bucket-memory {command}", principal_id=user)


def _run[T](
    work: Callable[[MemoryAdmin], Awaitable[T]], url: str, *, read_only: bool = False, new_ok: bool = False
) -> T:
    """Open the memory, run `work` on it, and turn a store error into a message and exit code 3.

    A command that only reads opens the store `read_only`, so it needs only read permissions.
    Unless `new_ok`, a URL where nothing was ever written is exit code 4 (a mistyped URL)."""

    async def opened() -> T:
        async with open_store(url, read_only=read_only) as store:
            if not new_ok:
                await _check_memory_there(store)
            return await work(MemoryAdmin(store))

    with _store_errors():
        try:
            return asyncio.run(opened())
        except _NoMemory:
            err.print(Text("error", style="red"), Text(f": no memory at {url}: nothing was ever written there."))
            err.print("Check the URL (bucket-memory ls lists a memory; its prefix is part of the URL).")
            raise typer.Exit(EXIT_NO_MEMORY) from None


class _NoMemory(Exception):
    """The URL names a place where no memory was ever written."""


async def _check_memory_there(store: LogFileStore) -> None:
    """`_NoMemory` where the prefix holds no commit or checkpoint and never did (`memory_deleted` if it
    did); without loading the memory, so that `verify` can still report a damaged one."""
    reader = store.log.reader
    if await reader.list_log() or await reader.list_checkpoints():
        return
    if await reader.log_existed():
        raise deleted(store.location)
    raise _NoMemory


def _confirm(changes: Changeset, what: str, yes: bool) -> bool:
    """Show what a bulk change will do; whether to go on (False: nothing to change). Off a terminal
    it needs --yes; on one the user says."""
    if not changes.written and not changes.deleted:
        return False
    out.print(
        f"{what} would write {_count(changes.written, 'file')} and delete {_count(changes.deleted, 'file')} "
        f"(as of commit {changes.seq}):"
    )
    for verb, paths in (("write ", changes.written), ("delete", changes.deleted)):
        for path in paths[:_LISTED]:
            out.print(f"  {verb} {path}")
        if len(paths) > _LISTED:
            out.print(f"  ... and {len(paths) - _LISTED} more to {verb.strip()}")
    if yes:
        return True
    if not sys.stdin.isatty():
        err.print("Not on a terminal: pass --yes to make these changes. Nothing was changed.")
        raise typer.Exit(EXIT_USAGE)
    if not typer.confirm("Make these changes?", default=False):
        err.print("Nothing was changed.")
        raise typer.Exit(EXIT_PROBLEMS)
    return True


@contextmanager
def _store_errors() -> Iterator[None]:
    """A store error becomes its code and message on stderr, and exit code 3."""
    try:
        yield
    except MemoryStoreError as error:
        err.print(Text("error", style="red"), Text(f"({error.code}): {error}"))
        raise typer.Exit(EXIT_STORE) from None
    except (typer.Exit, typer.Abort, KeyboardInterrupt):
        raise
    except Exception as error:  # a failure nobody mapped: still a message and exit code 3, not a traceback
        err.print(Text("error", style="red"), Text(f"(unexpected): {type(error).__name__}: {error}"))
        raise typer.Exit(EXIT_STORE) from None


def _moment(text: str) -> datetime:
    """An ISO 8601 time such as 2026-11-30T17:06:47.264Z; UTC when it names no zone."""
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise typer.BadParameter(f"{text!r} is not an ISO 8601 time such as 2026-11-30T17:06:47Z.") from None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _print_json(value: Any) -> None:
    sys.stdout.write(json.dumps(value, indent=2, ensure_ascii=False) + "\n")


@contextmanager
def _progress(description: str) -> Iterator[Callable[[int, int], None]]:
    """A progress bar on stderr, fed (done, total)."""
    with Progress(TextColumn(description), BarColumn(), MofNCompleteColumn(), console=err, transient=True) as progress:
        task = progress.add_task(description, total=None)

        def advance(done: int, total: int) -> None:
            progress.update(task, completed=done, total=total)

        yield advance


@app.command()
def ls(url: Url, as_json: Json = False) -> None:
    """List the files with their versions, sizes and descriptions."""
    entries = _run(lambda admin: admin.store.list(), url, read_only=True)
    if as_json:
        _print_json([asdict(entry) for entry in entries])
        return
    table = Table("path", "version", "bytes", "description", box=None)
    for entry in entries:
        table.add_row(entry.path, entry.version, str(entry.size), entry.description or "")
    out.print(table)


@app.command()
def cat(
    url: Url,
    path: str,
    version: Annotated[str | None, typer.Option(help="Show the file as of this version (commit).")] = None,
) -> None:
    """Print a file, now or as of a version."""
    file = _run(
        lambda admin: admin.store.read(path) if version is None else admin.read_at(path, version), url, read_only=True
    )
    sys.stdout.write(file.text)


@app.command()
def log(
    url: Url,
    path: Annotated[str | None, typer.Argument(help="Only changes to this file.")] = None,
    limit: Annotated[int, typer.Option(min=1, help="At most this many entries, newest first.")] = 50,
    as_json: Json = False,
) -> None:
    """Show the retained history: who changed what, when."""
    revisions = _run(lambda admin: admin.revisions(path), url, read_only=True)[:limit]
    if as_json:
        _print_json([asdict(revision) for revision in revisions])
        return
    table = Table("version", "time", "action", "path", "by", box=None)
    for revision in revisions:
        action = f"{revision.action} {revision.other}" if revision.other else revision.action
        who = " ".join(part for part in (revision.origin.principal_id, revision.origin.run_id) if part)
        table.add_row(revision.version, revision.time, action, revision.path or "*", who)
    out.print(table)


@app.command()
def diff(
    url: Url,
    path: str,
    start: Annotated[str, typer.Option("--from", help="The older version.")],
    end: Annotated[str | None, typer.Option("--to", help="The newer version (default: now).")] = None,
) -> None:
    """Show how a file changed between two versions, as a unified diff."""

    async def texts(admin: MemoryAdmin) -> tuple[str, str]:
        before = await admin.read_at(path, start)
        after = await (admin.store.read(path) if end is None else admin.read_at(path, end))
        return before.text, after.text

    before, after = _run(texts, url, read_only=True)
    lines = difflib.unified_diff(
        before.splitlines(keepends=True),
        after.splitlines(keepends=True),
        f"{path}@{start}",
        f"{path}@{end or 'now'}",
    )
    sys.stdout.writelines(lines)


@app.command()
def restore(
    url: Url,
    path: str,
    version: Annotated[str, typer.Option(help="The version to bring back.")],
) -> None:
    """Make a file what it was at a version, as a new commit (itself undoable)."""
    result = _run(lambda admin: admin.restore(path, version, origin=_origin("restore")), url)
    out.print(
        f"{path}: "
        + (f"deleted (it did not exist at version {version})" if result is None else f"now version {result}")
    )


@app.command()
def rollback(
    url: Url,
    to: Annotated[int | None, typer.Option(help="The commit to roll the whole memory back to.")] = None,
    time: Annotated[
        str | None, typer.Option(help="Roll back to the last commit at or before this ISO 8601 time.")
    ] = None,
    yes: Yes = False,
) -> None:
    """Make the whole memory what it was at a commit or time, as one new commit.

    Shows every file it would write or delete first, and asks (or needs --yes off a terminal).
    """
    if (to is None) == (time is None):
        err.print("Give exactly one of --to SEQ or --time ISO-8601.")
        raise typer.Exit(EXIT_USAGE)

    async def preview(admin: MemoryAdmin) -> tuple[int, Changeset]:
        target = await admin.seq_at(_moment(time)) if time is not None else to
        assert target is not None
        return target, await admin.preview_rollback(target)

    target, changes = _run(preview, url)
    if not _confirm(changes, f"Rolling back to commit {target}", yes):
        out.print(f"already as at commit {target}")
        return
    seq = _run(lambda admin: admin.rollback(target, origin=_origin("rollback"), at=changes.seq), url)
    out.print(f"rolled back to commit {target} as commit {seq}")


@app.command("export")
def export_files(url: Url, directory: Annotated[Path, typer.Argument(help="An empty or new directory.")]) -> None:
    """Write the files, as they are at one commit, as plain files openable by the harness's DirectoryFileStore."""
    if directory.exists() and (not directory.is_dir() or any(directory.iterdir())):
        err.print(f"{directory} is not an empty directory; export into a new or empty one.")
        raise typer.Exit(EXIT_USAGE)

    async def work(admin: MemoryAdmin) -> tuple[int, int]:
        with _progress("exporting") as advance:
            return await export_snapshot(admin.store, directory, advance)

    seq, count = _run(work, url, read_only=True)
    out.print(f"exported {_count(range(count), 'file')} as at commit {seq} to {directory}")


@app.command("import")
def import_files(
    url: Url,
    directory: Annotated[Path, typer.Argument(exists=True, file_okay=False, help="A directory of text files.")],
    replace: Annotated[
        bool, typer.Option(help="Also delete memory files the directory lacks (shown first; asks, or needs --yes).")
    ] = False,
    yes: Yes = False,
) -> None:
    """Write a directory's files into the memory as one commit.

    Every regular UTF-8 file is read, dot-files included; version-control folders (.git, .hg, .svn)
    and links are skipped, and --replace never deletes memory files where something was skipped.
    Two names that are one path in Unicode NFC are refused. Example: bucket-memory import s3://b/team ./notes
    """
    with _store_errors(), _progress("reading") as advance:
        found = read_directory(directory, FileFormat(), advance)
    origin = _origin("import")
    if replace:
        changes = _run(
            lambda admin: admin.preview_put_files(found.files, replace=True, keep=found.kept), url, new_ok=True
        )
        if not _confirm(changes, f"Importing {directory} with --replace", yes):
            out.print(f"{_count(found.files, 'file')} read; nothing changed")
            return
        at: int | None = changes.seq
    else:
        at = None
    seq = _run(
        lambda admin: admin.put_files(found.files, replace=replace, origin=origin, keep=found.kept, at=at),
        url,
        new_ok=True,
    )
    skipped = f" ({_count(found.skipped, 'path')} skipped: {_keys(found.skipped)})" if found.skipped else ""
    out.print(
        f"{_count(found.files, 'file')} read{skipped}; "
        + ("nothing changed" if seq is None else f"committed as commit {seq}")
    )


@app.command()
def verify(url: Url, as_json: Json = False) -> None:
    """Read every object, check the hash chain and checkpoints; exit 1 on any problem."""

    async def work(admin: MemoryAdmin) -> list[Any]:
        with _progress("verifying") as advance:
            return await admin.verify(advance)

    problems = _run(work, url, read_only=True)
    if as_json:
        _print_json([asdict(problem) for problem in problems])
    elif problems:
        for problem in problems:
            out.print(Text(problem.key, style="red"), Text(f": {problem.message}"), sep="")
    else:
        out.print("ok: every commit and checkpoint is whole and chained")
    if problems:
        raise typer.Exit(EXIT_PROBLEMS)


@app.command()
def compact(url: Url) -> None:
    """Delete log and checkpoint objects older than the newest aged checkpoint and the retention."""
    result = _run(lambda admin: admin.compact(), url)
    if result.floor == 0:
        out.print("nothing to compact yet: no checkpoint is older than the grace period within the retention")
    else:
        out.print(
            f"history now starts at commit {result.floor}: removed {result.log_deleted} commits and "
            f"{result.checkpoints_deleted} checkpoints"
        )


@app.command()
def recover(
    url: Url,
    as_of: Annotated[
        str | None, typer.Option("--as-of", help="Then make the memory what it was at this moment (ISO 8601).")
    ] = None,
    yes: Yes = False,
    as_json: Json = False,
) -> None:
    """Bring back every acknowledged commit from the bucket's object versions.

    Re-creates what a deleted prefix lost, repairs damaged objects, and re-applies on top, as new
    commits, what writers committed after a wipe. With --as-of, then makes the memory what it was
    at that moment, as one new commit (past a purge or compaction), showing what it changes first
    and asking (or needing --yes off a terminal). Safe to run again and while agents write. Needs
    versioning on the bucket.
    """
    moment = _moment(as_of) if as_of is not None else None
    origin = _origin("recover")
    done = _run(lambda admin: admin.recover(None, origin=origin), url, new_ok=True)
    as_of_commit = None
    if moment is not None:
        changes = _run(lambda admin: admin.preview_recover_as_of(moment), url)
        if _confirm(changes, f"Making the memory as at {moment.isoformat()}", yes):
            as_of_commit = _run(lambda admin: admin.make_as_of(moment, origin=origin, at=changes.seq), url)
    restoration = done.restoration
    if as_json:
        _print_json(
            {
                "restored": list(restoration.restored),
                "repaired": list(restoration.repaired),
                "reapplied": [{"from": old, "to": new} for old, new in restoration.reapplied],
                "head": restoration.head,
                "as_of_commit": as_of_commit,
                "versioning": done.versioning,
            }
        )
        return
    if restoration.restored:
        out.print(f"restored {_count(restoration.restored, 'deleted object')}: {_keys(restoration.restored)}")
    if restoration.repaired:
        out.print(f"repaired {_count(restoration.repaired, 'damaged object')}: {_keys(restoration.repaired)}")
    for old, new in restoration.reapplied:
        landed = f"as commit {new}" if new is not None else "(nothing left to change)"
        out.print(f"re-applied commit {old}, written after the wipe, {landed}")
    if not restoration.changed:
        out.print(f"nothing to restore: every acknowledged commit is in place, up to commit {restoration.head}")
    else:
        out.print(f"the memory is whole again, up to commit {restoration.head}")
    if moment is not None:
        out.print(
            f"already as at {moment.isoformat()}"
            if as_of_commit is None
            else f"made as at {moment.isoformat()} as commit {as_of_commit}"
        )
    if done.versioning != "enabled":
        err.print(_versioning_warning(done.versioning, url))


def _count(items: Sized, noun: str) -> str:
    return f"{len(items)} {noun}{'' if len(items) == 1 else 's'}"


def _keys(keys: Sequence[str]) -> str:
    return ", ".join(keys) if len(keys) <= 6 else f"{', '.join(keys[:3])}, ... {', '.join(keys[-2:])}"


def _versioning_warning(versioning: str, url: str) -> str:
    if versioning == "unknown":
        return f"warning: cannot read the versioning of {url} (no permission); recovery depends on it."
    return (
        f"warning: versioning is {versioning} on {url}: a deleted or overwritten object cannot be brought back. "
        "Turn it on (`bucket-memory init --enable-versioning`)."
    )


@app.command()
def stats(url: Url, as_json: Json = False) -> None:
    """Files, bytes, commits, history floor and checkpoint age."""
    result = _run(lambda admin: admin.stats(), url, read_only=True)
    if as_json:
        _print_json(asdict(result))
        return
    age = f"{result.checkpoint_age:.0f} s ago" if result.checkpoint_age is not None else "none yet"
    out.print(
        f"files          {result.files}\n"
        f"bytes          {result.bytes} of {result.max_bytes}\n"
        f"head commit    {result.head}\n"
        f"retained log   {result.commits} commits from {result.history_floor or '-'}\n"
        f"checkpoints    {result.checkpoints}, newest {result.checkpoint or '-'} ({age})",
        highlight=False,
    )


@app.command()
def init(
    url: Annotated[str, typer.Argument(help="s3://bucket[/prefix] or gs://bucket[/prefix]")],
    enable_versioning: Annotated[
        bool, typer.Option(help="Turn versioning on for an existing bucket that has it off.")
    ] = False,
    noncurrent_days: Annotated[int, typer.Option(min=1, help="Days old object versions are kept.")] = 30,
    tls_only: Annotated[
        bool | None,
        typer.Option(
            "--tls-only/--no-tls-only",
            help="Add (or skip) the S3 policy statement that denies requests without TLS; "
            "by default added except against an http:// endpoint such as a local emulator.",
        ),
    ] = None,
    project: Annotated[str | None, typer.Option(help="GCS: the project a new bucket belongs to.")] = None,
    location: Annotated[str | None, typer.Option(help="GCS: the location of a new bucket, such as EU.")] = None,
    kms_key: Annotated[str | None, typer.Option(help="GCS: the Cloud KMS key to encrypt with by default.")] = None,
    dry_run: Annotated[bool, typer.Option(help="Show what init would change, and change nothing.")] = False,
) -> None:
    """Create or adopt a memory bucket with the Terraform modules' settings (versioning, lifecycle,
    private, encrypted), adding them beside the bucket's own: nothing there is removed.

    Prints its plan first. Then checks, under the URL's prefix, that the endpoint refuses a second
    create of one key (the store needs it). Example: bucket-memory init s3://my-memories --dry-run
    """
    from .provision import InitOptions, init_bucket

    options = InitOptions(enable_versioning, noncurrent_days, tls_only, project, location, kms_key)
    with _store_errors():
        plan = init_bucket(url, options, dry_run=dry_run)
    for step in plan.steps:
        mark = "+" if step.apply is not None else "="
        out.print(f"{mark} {step.setting:<14} {step.action}")
    for warning in plan.warnings:
        err.print(f"warning: {warning}")
    if dry_run:
        out.print(f"dry run: {len(plan.changes)} changes planned for {plan.bucket}, nothing changed")
        return
    from .connect import check_create_only

    async def checked() -> None:
        async with open_store(url) as store:
            await check_create_only(store.log.objects)

    with _store_errors():
        asyncio.run(checked())
    changed = f"{len(plan.changes)} changes made" if plan.changes else "nothing to change"
    out.print(f"{plan.bucket}: {changed}; the endpoint refuses duplicate creates")


@app.command()
def doctor(url: Url) -> None:
    """Check that the endpoint refuses a second create of one key (the store needs it), that the
    memory loads, and whether the bucket keeps versions; exit 1 on a problem.

    The check creates and deletes one object under the prefix's doctor/ folder."""
    from .connect import check_create_only
    from .objects import VersionedObjectStore

    async def work(admin: MemoryAdmin) -> str | None:
        await check_create_only(admin.store.log.objects)
        await admin.store.list()
        if not isinstance(admin.store.log.objects, VersionedObjectStore):
            return None
        return await admin.recovery.versioning()

    try:
        versioning = _run(work, url, new_ok=True)
    except typer.Exit as exit:
        raise typer.Exit(EXIT_PROBLEMS if exit.exit_code == EXIT_STORE else exit.exit_code) from None
    out.print(f"ok: {url} refuses duplicate creates and its memory loads")
    if versioning not in (None, "enabled"):
        err.print(_versioning_warning(versioning, url))
        raise typer.Exit(EXIT_PROBLEMS)
