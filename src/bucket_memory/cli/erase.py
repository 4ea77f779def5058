"""`bucket-memory erase`: a file's every text removed from the memory's whole past."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Annotated

import typer

from .base import Json, Url, Yes, ask, command, count, emit, err, listed, origin, out
from .checks import checked_path
from .running import run

if TYPE_CHECKING:
    from ..admin import MemoryAdmin
    from ..history.erasure import ErasurePlan
    from .output import Erased

DryRun = Annotated[
    bool, typer.Option("--dry-run", help="List what would be rewritten and deleted, and change nothing.")
]


@command()
def erase(
    url: Url,
    path: Annotated[str, typer.Argument(help="The file to erase.", show_default=False, callback=checked_path)],
    dry_run: DryRun = False,
    yes: Yes = False,
    as_json: Json = False,
) -> None:
    """Erase every text a file ever had: from the memory, its history, its checkpoints and the bucket's
    old versions of them, for good (data-protection requests, a leaked secret).

    The file follows its moves: every name it had is erased (a name it had only before the retained
    log is unknown: erase it too; --dry-run lists the names it knows). One commit records the erasure, naming
    the file and you (never its text); history then shows its versions as erased, and `verify` still
    checks the whole log. Shows what it will rewrite and delete first, and asks (or needs --yes off a
    terminal). Needs the operator's permissions (`bucket-memory policy --operator`). Running it again
    finishes an erasure that was stopped part-way.
    Example: bucket-memory erase s3://my-memories/team people/alice.md --dry-run
    """
    erased = erasing(url, lambda admin: admin.preview_erase(path), "erase", dry_run, yes)
    emit(erased, as_json, lambda: report(erased))


def erasing(
    url: str, preview: Callable[[MemoryAdmin], Awaitable[ErasurePlan]], command_name: str, dry_run: bool, yes: bool
) -> Erased:
    """Show what an erasure does, ask, and do it (or only show it, `dry_run`): on the file the plan
    shown names, so that a record id's prefix is not resolved again to another record."""
    plan = run(preview, url, read_only=dry_run)
    _show(plan)
    if dry_run:
        return _output(plan, dry_run=True)
    ask(yes)
    who = origin(command_name, url)
    return _output(run(lambda admin: admin.erase(plan.path, origin=who), url), dry_run=False)


def _show(plan: ErasurePlan) -> None:
    commit = f"commit {plan.erasure} (made before)" if plan.erasure is not None else "a new commit"
    err.print(
        f"Erasing {plan.path} (named {', '.join(plan.paths)}) records {commit} and erases its texts from "
        f"{count(plan.rewrites, 'object')}, and deletes {count(plan.versions, 'stored old version')}"
        + (" and the version each rewrite replaces:" if plan.rewrites else ":")
    )
    listed("rewrite", plan.rewrites)
    listed("delete ", plan.versions)


def _output(plan: ErasurePlan, *, dry_run: bool) -> Erased:
    from .output import Erased

    return Erased(
        path=plan.path,
        paths=list(plan.paths),
        erasure=plan.erasure,
        rewritten=list(plan.rewrites),
        versions_deleted=list(plan.versions),
        dry_run=dry_run,
    )


def report(erased: Erased) -> None:
    if erased.dry_run:
        out.print(f"{erased.path}: dry run, nothing changed")
        return
    out.print(
        f"{erased.path}: erased by commit {erased.erasure}; {count(erased.rewritten, 'object')} rewritten, "
        f"{count(erased.versions_deleted, 'old version')} deleted"
    )
