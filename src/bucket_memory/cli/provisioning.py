"""The commands that set up and check where memories live: init (a bucket with the Terraform
modules' settings), policy (the IAM grants the memories need), doctor (that the endpoint, the
memory and the bucket's versioning are as the store needs) and memories (those under a bucket, a
prefix or a directory)."""

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING, Annotated

import typer

from .base import URL_FORMS, Json, Url, app, command, emit, err, out
from .checks import as_usage, checked_url
from .failures import EXIT_PROBLEMS, EXIT_STORE, EXIT_USAGE, fail
from .maintenance import Concurrency, Every, reported
from .running import run, run_each, store_errors
from .versioning import bucket_of, versioning_warning

if TYPE_CHECKING:
    from rich.console import Console

    from ..admin import MemoryAdmin
    from ..provision import Plan
    from .output import Initialized


def _bucket_url(value: str) -> str:
    from ..objects.urls import parse_url

    with as_usage():
        if parse_url(value).scheme == "file":
            raise typer.BadParameter("init makes s3:// or gs:// buckets; a local path needs none.")
    return value


def _iam_urls(values: list[str]) -> list[str]:
    from ..objects.urls import parse_url

    with as_usage():
        if any(parse_url(value).scheme == "file" for value in values):
            raise typer.BadParameter("policy takes s3:// or gs:// URLs: a local memory has no IAM.")
    return values


@command()
def init(
    url: Annotated[
        str,
        typer.Argument(help="s3://bucket or s3://bucket/prefix (or gs://)", show_default=False, callback=_bucket_url),
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

    from ..provision import InitOptions, VersioningOff, init_bucket

    project = os.environ.get("GOOGLE_CLOUD_PROJECT")
    options = InitOptions(enable_versioning, noncurrent_days, tls_only, project, location, kms_key)
    with store_errors():
        try:
            plan = init_bucket(url, options, dry_run=dry_run)
        except VersioningOff as error:
            fail(
                "usage",
                str(error),
                hint=f"`bucket-memory init {bucket_of(url)} --enable-versioning` turns it on.",
                exit_code=EXIT_USAGE,
            )
    _show_plan(plan, err if as_json else out)
    if dry_run:
        emit(
            _initialized(plan),
            as_json,
            lambda: out.print(f"dry run: {len(plan.changes)} changes planned for {plan.bucket}, nothing changed"),
        )
        return
    _check_create_only(url)
    changed = f"{len(plan.changes)} changes made" if plan.changes else "nothing to change"
    emit(
        _initialized(plan),
        as_json,
        lambda: out.print(f"{plan.bucket}: {changed}; the endpoint refuses duplicate creates"),
    )


def _show_plan(plan: Plan, say: Console) -> None:
    """Init's plan, a setting a line (+ a change, = kept), on `say`; then its warnings, on standard error."""
    for step in plan.steps:
        say.print(f"{'+' if step.apply is not None else '='} {step.setting:<14} {step.action}")
    for warning in plan.warnings:
        err.print(f"warning: {warning}")


def _initialized(plan: Plan) -> Initialized:
    """Init's --json output: its plan, whether it was carried out, and its warnings."""
    from .output import Initialized, Step

    return Initialized(
        bucket=plan.bucket,
        steps=[Step(setting=step.setting, action=step.action, change=step.apply is not None) for step in plan.steps],
        applied=plan.applied,
        warnings=plan.warnings,
    )


def _check_create_only(url: str) -> None:
    """That the endpoint refuses a second create of one key, under the URL's prefix (the store needs it)."""
    from ..connect import check_create_only, open_store

    async def checked() -> None:
        async with open_store(url) as store:
            await check_create_only(store.objects)

    with store_errors():
        asyncio.run(checked())


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
            "deleting them (erase), and creating and deleting erasure records, which agents may only read."
        ),
    ] = False,
    kms_key: Annotated[
        str | None, typer.Option(help="S3: the bucket's KMS key ARN, to grant through S3.", show_default=False)
    ] = None,
    tenant_tag: Annotated[
        str | None,
        typer.Option(
            metavar="NAME",
            help="S3: grant each session the memory PREFIX/<its NAME tag> alone (${aws:PrincipalTag/NAME}), "
            "for one role serving every tenant through AssumeRole or TagSession tags. Not on GCS.",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Print the IAM grants the memories need, as the Terraform modules write them; changes nothing.

    On S3, a policy document for agents (or, with --operator, for operators), limited to the
    prefixes, or with --tenant-tag to the memory of each session's tenant under them; attach it
    with `aws iam put-role-policy`. On GCS, each role to bind and its condition. Agents never create
    or delete an erasure record or a destroy's proof (only --operator does).
    Example: bucket-memory policy s3://my-memories/team > policy.json
    """
    from a13n_harness.providers.memory import MemoryStoreError

    from ..objects.urls import parse_url
    from ..policy import GCS_TENANT_LIMIT, access_policy, memory_prefixes, operator_policy

    with as_usage():  # made from the command line alone: whatever it refuses, the command line was wrong
        parsed = [parse_url(url) for url in urls]
        bucket, prefixes = memory_prefixes(parsed)
        if parsed[0].scheme == "gs":
            if tenant_tag is not None:
                raise MemoryStoreError("invalid_path", f"--tenant-tag is for S3 only. {GCS_TENANT_LIMIT}")
            _print_gcs_bindings(bucket, prefixes, operator)
            return
        made = operator_policy if operator else access_policy
        out.print(json.dumps(made(bucket, prefixes, kms_key, tenant_tag=tenant_tag), indent=2))


def _print_gcs_bindings(bucket: str, prefixes: list[str], operator: bool) -> None:
    """The bindings the GCS module makes: operators one, agents two (reading everything, writing all
    but the erasure records)."""
    from ..policy import gcs_condition, gcs_write_condition

    condition = gcs_condition(bucket, prefixes)
    read = f"condition: {condition}" if condition else "condition: none (the whole bucket)"
    if operator:
        out.print("role: roles/storage.objectUser (reading and deleting old versions, writing erasure records)")
        out.print(read)
        return
    out.print("role: roles/storage.objectViewer (reading and listing, erasure records included)")
    out.print(read)
    out.print("role: roles/storage.objectUser (writing, but no erasure record)")
    out.print(f"condition: {gcs_write_condition(bucket, prefixes)}")


@command()
def doctor(url: Url, every: Every = False, concurrency: Concurrency = 8, as_json: Json = False) -> None:
    """Check that the endpoint refuses a second create of one key (the store needs it), that the
    memory loads, and whether the bucket keeps versions; exit 1 on a problem.

    The check creates and deletes one object under the prefix's doctor/ folder. With --all, of
    every memory under URL, a few at once, one line each (a destroyed memory is left untouched).
    Example: bucket-memory doctor s3://my-memories/team
    Example: bucket-memory doctor s3://my-memories/users --all
    """
    from .output import Checked

    try:
        if every:
            _doctor_all(url, concurrency, as_json)
            return
        versioning = run(doctor_checks, url, new_ok=True, says_versioning=True)
    except typer.Exit as exit:
        raise typer.Exit(EXIT_PROBLEMS if exit.exit_code == EXIT_STORE else exit.exit_code) from None
    whole = versioning in (None, "enabled")  # else no "ok:" line: the warning, and exit 1

    def said() -> None:
        if whole:
            out.print(f"ok: {url} refuses duplicate creates and its memory loads")

    emit(Checked(create_only=True, versioning=versioning), as_json, said)
    if not whole:
        err.print(versioning_warning(versioning or "unknown", url))
        raise typer.Exit(EXIT_PROBLEMS)


async def doctor_checks(admin: MemoryAdmin) -> str | None:
    """`doctor`'s checks of one memory: it loads (first: a destroyed or unreadable memory is left
    unwritten), its endpoint refuses a second create, and its bucket's versioning (None: a local
    directory, which keeps none). Requests: the load's, four for the create check, one for versioning."""
    from ..connect import check_create_only
    from ..objects.interface import VersionedObjectStore

    await admin.store.list()
    await check_create_only(admin.store.objects)
    if not isinstance(admin.store.objects, VersionedObjectStore):
        return None
    return await admin.recovery.versioning()


def _doctor_all(url: str, concurrency: int, as_json: bool) -> None:
    from .output import Checked, MemoryChecked

    found = [
        MemoryChecked(
            **reported(outcome),
            ok=outcome.error is None and outcome.result in (None, "enabled"),
            checked=Checked(create_only=True, versioning=outcome.result) if outcome.error is None else None,
        )
        for outcome in run_each(doctor_checks, url, concurrency, read_only=False)
    ]

    def report() -> None:
        for memory in found:
            checked = memory.checked
            said = "destroyed" if memory.destroyed else memory.error.message if memory.error else "ok"
            if checked is not None and not memory.ok:
                said = f"versioning is {checked.versioning or 'unknown'}: the bucket keeps no old versions to recover"
            out.print(f"{memory.url}: {said}")
        live = [memory for memory in found if not memory.destroyed]
        whole = f"{sum(memory.ok for memory in live)} of {len(live)} memories pass"
        out.print(whole + (f", {len(found) - len(live)} destroyed" if len(live) < len(found) else ""))

    emit(found, as_json, report)
    if not all(memory.ok or memory.destroyed for memory in found):
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
