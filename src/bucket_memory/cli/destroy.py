"""`bucket-memory destroy`: a whole memory deleted for good, every version of it (an end user's
data-protection request), with a tombstone left that refuses every store still open on it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from .base import Json, Url, Yes, ask, command, emit, err, out
from .running import run

DryRun = Annotated[bool, typer.Option("--dry-run", help="Show what would be deleted, and delete nothing.")]

if TYPE_CHECKING:
    from ..admin import MemoryAdmin
    from ..destroy import Destroyed, Destroyer, DestroyPlan
    from .output import Destruction


@command()
def destroy(url: Url, dry_run: DryRun = False, yes: Yes = False, as_json: Json = False) -> None:
    """Delete a whole memory for good: every version and delete marker of its commits, checkpoints,
    intents and erasure records. A tombstone (no text, path or principal) is left at each of its
    commit keys, with the operator's proof of the destroy under erasures/ (which agents cannot
    write: a tombstone without it is a forgery), and every store still open on the memory fails its
    next call with memory_deleted.

    Shows what it deletes first, and asks (or needs --yes off a terminal). A prefix holding other
    memories is refused, naming them; objects under it that are not the memory's are left. Running
    it again finishes a destroy that was stopped part-way; the memory is refused from its first
    write on. Needs the operator's permissions (`bucket-memory policy --operator`).
    Example: bucket-memory destroy s3://my-memories/team --dry-run
    """
    # Never read_only: the obstore layer a read opens lists no stored versions.
    plan = run(lambda admin: _destroyer(admin).plan(), url, new_ok=True, says_versioning=True)
    _show(plan)
    if dry_run:
        result = _output(url, plan, None)
    else:
        ask(yes)
        result = _output(url, plan, run(lambda admin: _destroyer(admin).destroy(), url, new_ok=True))
    emit(result, as_json, lambda: _report(result))


def _destroyer(admin: MemoryAdmin) -> Destroyer:
    from ..destroy import Destroyer

    store = admin.store
    return Destroyer(store.objects, attempts=store.options.request_attempts)


def _show(plan: DestroyPlan) -> None:
    sealed = " (a destroy before sealed it: every store is refused already)" if plan.sealed else ""
    err.print(
        f"Destroying {plan.location}{sealed} deletes {plan.objects} objects: {plan.versions} stored versions "
        f"({plan.markers} delete markers), {plan.bytes} bytes, for good. A tombstone with no text, path or "
        f"principal is left at each of its {plan.covered} commit keys and one past them."
    )


def _output(url: str, plan: DestroyPlan, done: Destroyed | None) -> Destruction:
    from .output import Destruction

    return Destruction(
        url=url,
        objects=plan.objects,
        versions=plan.versions,
        markers=plan.markers,
        bytes=plan.bytes,
        versions_deleted=done.versions_deleted if done else 0,
        bytes_deleted=done.bytes_deleted if done else 0,
        tombstones=done.tombstones if done else 0,
        dry_run=done is None,
    )


def _report(result: Destruction) -> None:
    if result.dry_run:
        out.print(f"{result.url}: dry run, nothing deleted")
        return
    out.print(
        f"{result.url}: destroyed; {result.versions_deleted} stored versions ({result.bytes_deleted} bytes) "
        f"deleted, {result.tombstones} tombstones left with the operator's proof of the destroy"
    )
