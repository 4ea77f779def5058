"""Operator commands: export, import, verify, compact, stats, recover, doctor, init, policy, memories."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.text import Text

from .base import (
    TIME_HELP,
    URL_FORMS,
    Json,
    Url,
    Yes,
    app,
    as_usage,
    checked_url,
    command,
    confirm,
    count,
    emit,
    err,
    keys,
    moment,
    origin,
    out,
    progress,
    run,
    store_errors,
)
from .failures import EXIT_PROBLEMS, EXIT_STORE

if TYPE_CHECKING:
    from ..admin import MemoryAdmin
    from .output import (
        Initialized,
        Problem,
    )


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


@command()
def verify(url: Url, as_json: Json = False) -> None:
    """Read every object, check the hash chain and checkpoints; exit 1 on any problem.

    Example: bucket-memory verify s3://my-memories/team
    """
    from .output import Problem, Verified

    async def work(admin: MemoryAdmin) -> list[Problem]:
        with progress("verifying") as advance:
            return [Problem(key=problem.key, message=problem.message) for problem in await admin.verify(advance)]

    problems = run(work, url, read_only=True)

    def report() -> None:
        for problem in problems:
            out.print(Text(problem.key, style="red"), Text(f": {problem.message}"), sep="")
        if not problems:
            out.print("ok: every commit and checkpoint is whole and chained")

    emit(Verified(ok=not problems, problems=problems), as_json, report)
    if problems:
        raise typer.Exit(EXIT_PROBLEMS)


@command()
def compact(url: Url, as_json: Json = False) -> None:
    """Delete log and checkpoint objects older than the newest aged checkpoint and the retention.

    Example: bucket-memory compact s3://my-memories/team
    """
    from .output import Compacted

    result = run(lambda admin: admin.compact(), url)
    said = (
        "nothing to compact yet: no checkpoint is older than the grace period within the retention"
        if result.floor == 0
        else f"history now starts at commit {result.floor}: removed {result.log_deleted} commits and "
        f"{result.checkpoints_deleted} checkpoints"
    )
    emit(
        Compacted(floor=result.floor, log_deleted=result.log_deleted, checkpoints_deleted=result.checkpoints_deleted),
        as_json,
        lambda: out.print(said),
    )


@command()
def stats(url: Url, as_json: Json = False) -> None:
    """Files, bytes, commits, history floor and checkpoint age.

    Example: bucket-memory stats s3://my-memories/team
    """
    result = run(lambda admin: admin.stats(), url, read_only=True)
    age = f"{result.checkpoint_age:.0f} s ago" if result.checkpoint_age is not None else "none yet"
    emit(
        result,
        as_json,
        lambda: out.print(
            f"files          {result.files}\n"
            f"bytes          {_sized(result.bytes)} of {_sized(result.max_bytes)} "
            f"({result.bytes / max(result.max_bytes, 1):.1%})\n"
            f"head commit    {result.head}\n"
            f"retained log   {result.commits} commits from {result.history_floor or '-'}\n"
            f"checkpoints    {result.checkpoints}, newest {result.checkpoint or '-'} ({age})"
        ),
    )


@command()
def recover(
    url: Url,
    as_of: Annotated[
        str | None, typer.Option("--as-of", help=f"Then make the memory what it was then: {TIME_HELP}.")
    ] = None,
    yes: Yes = False,
    as_json: Json = False,
) -> None:
    """Bring back every acknowledged commit from the bucket's object versions.

    Re-creates what a deleted prefix lost, repairs damaged objects, and re-applies on top, as new
    commits, what writers committed after a wipe. With --as-of, then makes the memory what it was
    at that moment, as one new commit (past a purge or compaction), showing what it changes first
    and asking (or needing --yes off a terminal). Safe to run again and while agents write. Needs
    versioning on the bucket. Example: bucket-memory recover s3://my-memories/team
    """
    from .output import Reapplied, Recovered

    when = moment(as_of) if as_of is not None else None
    who = origin("recover", url)
    done = run(lambda admin: admin.recover(None, origin=who), url, new_ok=True)
    as_of_commit = None
    if when is not None:
        changes = run(lambda admin: admin.preview_recover_as_of(when), url)
        if confirm(changes, f"Making the memory as at {when.isoformat()}", yes):
            as_of_commit = run(lambda admin: admin.make_as_of(when, origin=who, at=changes.seq), url)
    restoration = done.restoration

    def report() -> None:
        if restoration.restored:
            out.print(f"restored {count(restoration.restored, 'deleted object')}: {keys(restoration.restored)}")
        if restoration.repaired:
            out.print(f"repaired {count(restoration.repaired, 'damaged object')}: {keys(restoration.repaired)}")
        for old, new in restoration.reapplied:
            landed = f"as commit {new}" if new is not None else "(nothing left to change)"
            out.print(f"re-applied commit {old}, written after the wipe, {landed}")
        if not restoration.changed:
            out.print(f"nothing to restore: every acknowledged commit is in place, up to commit {restoration.head}")
        else:
            out.print(f"the memory is whole again, up to commit {restoration.head}")
        if when is not None:
            out.print(
                f"already as at {when.isoformat()}"
                if as_of_commit is None
                else f"made as at {when.isoformat()} as commit {as_of_commit}"
            )

    emit(
        Recovered(
            restored=list(restoration.restored),
            repaired=list(restoration.repaired),
            reapplied=[Reapplied(start=old, to=new) for old, new in restoration.reapplied],
            head=restoration.head,
            as_of_commit=as_of_commit,
            versioning=done.versioning,
        ),
        as_json,
        report,
    )
    if done.versioning != "enabled":
        err.print(versioning_warning(done.versioning, url))


def versioning_warning(versioning: str, url: str) -> str:
    if versioning == "unknown":
        return f"warning: cannot read the versioning of {url} (no permission); recovery depends on it."
    return (
        f"warning: versioning is {versioning} on {url}: a deleted or overwritten object cannot be brought back. "
        "Turn it on (`bucket-memory init --enable-versioning`)."
    )


def _bucket_url(value: str) -> str:
    from ..urls import parse_url

    with as_usage():
        if parse_url(value).scheme == "file":
            raise typer.BadParameter("init makes s3:// or gs:// buckets; a local path needs none.")
    return value


def _iam_urls(values: list[str]) -> list[str]:
    from ..urls import parse_url

    with as_usage():
        if any(parse_url(value).scheme == "file" for value in values):
            raise typer.BadParameter("policy takes s3:// or gs:// URLs: a local memory has no IAM.")
    return values


@command()
def init(
    url: Annotated[
        str,
        typer.Argument(help="s3://bucket[/prefix] or gs://bucket[/prefix]", show_default=False, callback=_bucket_url),
    ],
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
    location: Annotated[str | None, typer.Option(help="GCS: the location of a new bucket, such as EU.")] = None,
    kms_key: Annotated[str | None, typer.Option(help="GCS: the Cloud KMS key to encrypt with by default.")] = None,
    dry_run: Annotated[bool, typer.Option(help="Show what init would change, and change nothing.")] = False,
    as_json: Json = False,
) -> None:
    """Create or adopt a memory bucket with the Terraform modules' settings (versioning, lifecycle,
    private, encrypted), adding them beside the bucket's own: nothing there is removed.

    Prints its plan first (+ a change, = kept). Then checks, under the URL's prefix, that the
    endpoint refuses a second create of one key (the store needs it). Example: bucket-memory init
    s3://my-memories --dry-run
    """
    import os

    from ..connect import check_create_only, open_store
    from ..provision import InitOptions, init_bucket
    from .output import Initialized, Step

    project = os.environ.get("GOOGLE_CLOUD_PROJECT")
    options = InitOptions(enable_versioning, noncurrent_days, tls_only, project, location, kms_key)
    with store_errors():
        plan = init_bucket(url, options, dry_run=dry_run)
    say = err if as_json else out
    for step in plan.steps:
        say.print(f"{'+' if step.apply is not None else '='} {step.setting:<14} {step.action}")
    for warning in plan.warnings:
        err.print(f"warning: {warning}")

    def result() -> Initialized:
        return Initialized(
            bucket=plan.bucket,
            steps=[
                Step(setting=step.setting, action=step.action, change=step.apply is not None) for step in plan.steps
            ],
            applied=plan.applied,
            warnings=plan.warnings,
        )

    if dry_run:
        emit(
            result(),
            as_json,
            lambda: out.print(f"dry run: {len(plan.changes)} changes planned for {plan.bucket}, nothing changed"),
        )
        return

    async def checked() -> None:
        async with open_store(url) as store:
            await check_create_only(store.log.objects)

    with store_errors():
        asyncio.run(checked())
    changed = f"{len(plan.changes)} changes made" if plan.changes else "nothing to change"
    emit(result(), as_json, lambda: out.print(f"{plan.bucket}: {changed}; the endpoint refuses duplicate creates"))


@app.command()
def policy(
    urls: Annotated[
        list[str],
        typer.Argument(help="Memories of one bucket: s3://bucket/prefix or gs://bucket/prefix.", callback=_iam_urls),
    ],
    operator: Annotated[
        bool,
        typer.Option(
            help="Also grant what recover, compact, verify, erase and history need: reading old versions, "
            "and deleting them (erase)."
        ),
    ] = False,
    kms_key: Annotated[
        str | None, typer.Option(help="S3: the bucket's KMS key ARN, to grant through S3.", show_default=False)
    ] = None,
) -> None:
    """Print the IAM grants the memories need, as the Terraform modules write them; changes nothing.

    On S3, a policy document for agents (or, with --operator, for operators), limited to the
    prefixes; attach it with `aws iam put-role-policy`. On GCS, the condition to bind
    roles/storage.objectUser with. Example: bucket-memory policy s3://my-memories/team > policy.json
    """
    from ..policy import access_policy, gcs_condition, memory_prefixes, operator_policy
    from ..urls import parse_url

    with as_usage():  # made from the command line alone: whatever it refuses, the command line was wrong
        parsed = [parse_url(url) for url in urls]
        bucket, prefixes = memory_prefixes(parsed)
        if parsed[0].scheme == "gs":
            condition = gcs_condition(bucket, prefixes)
            out.print("role: roles/storage.objectUser (it includes reading old versions, for recover)")
            out.print(f"condition: {condition}" if condition else "condition: none (the whole bucket)")
            return
        made = operator_policy if operator else access_policy
        out.print(json.dumps(made(bucket, prefixes, kms_key), indent=2))


@command()
def doctor(url: Url, as_json: Json = False) -> None:
    """Check that the endpoint refuses a second create of one key (the store needs it), that the
    memory loads, and whether the bucket keeps versions; exit 1 on a problem.

    The check creates and deletes one object under the prefix's doctor/ folder.
    Example: bucket-memory doctor s3://my-memories/team
    """
    from ..connect import check_create_only
    from ..objects import VersionedObjectStore
    from .output import Checked

    async def work(admin: MemoryAdmin) -> str | None:
        await check_create_only(admin.store.log.objects)
        await admin.store.list()
        if not isinstance(admin.store.log.objects, VersionedObjectStore):
            return None
        return await admin.recovery.versioning()

    try:
        versioning = run(work, url, new_ok=True)
    except typer.Exit as exit:
        raise typer.Exit(EXIT_PROBLEMS if exit.exit_code == EXIT_STORE else exit.exit_code) from None
    emit(
        Checked(create_only=True, versioning=versioning),
        as_json,
        lambda: out.print(f"ok: {url} refuses duplicate creates and its memory loads"),
    )
    if versioning not in (None, "enabled"):
        err.print(versioning_warning(versioning, url))
        raise typer.Exit(EXIT_PROBLEMS)


@command()
def memories(
    url: Annotated[
        str,
        typer.Argument(
            help=f"A bucket, a prefix in one, or a directory: {URL_FORMS}.", show_default=False, callback=checked_url
        ),
    ],
    as_json: Json = False,
) -> None:
    """List the memories under a bucket, a prefix or a directory, as URLs for the other commands.

    Example: bucket-memory memories s3://my-memories
    """
    from ..connect import find_memories
    from .output import Memory

    with store_errors():
        found = [Memory(url=memory) for memory in asyncio.run(find_memories(url))]

    def lines() -> None:
        for memory in found:
            out.print(memory.url)

    emit(found, as_json, lines)


def _sized(count: int) -> str:
    """A number of bytes as people read it: 27 bytes, 4.2 KiB, 32 MiB (binary units, as quotas are set)."""
    size, unit = float(count), "bytes"
    for bigger in ("KiB", "MiB", "GiB", "TiB"):
        if size < 1024:
            break
        size, unit = size / 1024, bigger
    return f"{count} bytes" if unit == "bytes" else f"{size:.1f} {unit}".replace(".0 ", " ")
