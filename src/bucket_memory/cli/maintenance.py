"""The commands that look after a memory once it is in use: verify (its hash chain and checkpoints),
compact (its old log and checkpoints), stats (its size and history) and recover (what a wipe or
damage lost, from the bucket's object versions)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, TypedDict

import typer
from rich.text import Text

from .base import TIME_HELP, Json, Url, Yes, command, confirm, count, emit, err, keys, moment, origin, out, progress
from .failures import EXIT_PROBLEMS
from .running import run, run_each
from .versioning import versioning_warning

if TYPE_CHECKING:
    from ..admin import MemoryAdmin
    from ..fanout import Outcome
    from .output import Failure, Problem


Every = Annotated[bool, typer.Option("--all", help="Every memory under URL (a bucket or a folder), in one process.")]
Concurrency = Annotated[int, typer.Option(min=1, max=64, help="With --all: how many memories at once.")]


@command()
def verify(url: Url, every: Every = False, concurrency: Concurrency = 8, as_json: Json = False) -> None:
    """Read every object, check the hash chain and checkpoints; exit 1 on any problem.

    With --all, every memory under URL, a few at once, each reported on its own (one that cannot be
    read is a problem too).
    Example: bucket-memory verify s3://my-memories/team
    Example: bucket-memory verify s3://my-memories/users --all
    """
    from .output import Problem, Verified

    if every:
        _verify_all(url, concurrency, as_json)
        return

    async def work(admin: MemoryAdmin) -> list[Problem]:
        with progress("verifying") as advance:
            return [Problem(key=problem.key, message=problem.message) for problem in await admin.verify(advance)]

    problems = run(work, url, read_only=True)

    def report() -> None:
        _problems(problems)
        if not problems:
            out.print("ok: every commit and checkpoint is whole and chained")

    emit(Verified(ok=not problems, problems=problems), as_json, report)
    if problems:
        raise typer.Exit(EXIT_PROBLEMS)


def _verify_all(url: str, concurrency: int, as_json: bool) -> None:
    from .output import MemoryVerified, Problem

    async def work(admin: MemoryAdmin) -> list[Problem]:
        return [Problem(key=problem.key, message=problem.message) for problem in await admin.verify()]

    verdicts = [
        MemoryVerified(
            **reported(outcome),
            # A destroyed memory (a user's data deleted on request) is what `destroy` meant to leave.
            ok=outcome.destroyed or (outcome.error is None and not outcome.result),
            problems=outcome.result or [],
        )
        for outcome in run_each(work, url, concurrency)
    ]

    def report() -> None:
        for verdict in verdicts:
            said = count(verdict.problems, "problem") if verdict.error is None else verdict.error.message
            said = "destroyed" if verdict.destroyed else "ok" if verdict.ok else said
            out.print(f"{verdict.url}: {said}")
            _problems(verdict.problems)
        live = [verdict for verdict in verdicts if not verdict.destroyed]
        whole = f"{sum(verdict.ok for verdict in live)} of {len(live)} memories whole"
        out.print(whole + (f", {len(verdicts) - len(live)} destroyed" if len(live) < len(verdicts) else ""))

    emit(verdicts, as_json, report)
    if not all(verdict.ok for verdict in verdicts):
        raise typer.Exit(EXIT_PROBLEMS)


def _problems(problems: list[Problem]) -> None:
    for problem in problems:
        out.print(Text(problem.key, style="red"), Text(f": {problem.message}"), sep="")


class Reported(TypedDict):
    """The fields every `--all` command reports of each memory, whatever its work gave."""

    url: str
    destroyed: bool
    error: Failure | None


def reported(outcome: Outcome[object]) -> Reported:
    """The memory, whether it was destroyed, and the store error that stopped its work (its code and message)."""
    from .output import Failure

    error = outcome.error
    failed = Failure(code=error.code, message=str(error), hint=None) if error is not None else None
    return Reported(url=outcome.url, destroyed=outcome.destroyed, error=failed)


@command()
def compact(url: Url, every: Every = False, concurrency: Concurrency = 8, as_json: Json = False) -> None:
    """Delete log and checkpoint objects older than the newest aged checkpoint and the retention.

    With --all, of every memory under URL, a few at once, one line each.
    Example: bucket-memory compact s3://my-memories/team
    Example: bucket-memory compact s3://my-memories/users --all
    """
    from .output import Compacted

    if every:
        _compact_all(url, concurrency, as_json)
        return

    result = run(lambda admin: admin.store.compact(), url)
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


def _compact_all(url: str, concurrency: int, as_json: bool) -> None:
    from .output import Compacted, MemoryCompacted

    async def work(admin: MemoryAdmin) -> Compacted:
        done = await admin.store.compact()
        return Compacted(floor=done.floor, log_deleted=done.log_deleted, checkpoints_deleted=done.checkpoints_deleted)

    found = [
        MemoryCompacted(
            **reported(outcome),
            compacted=outcome.result,
        )
        for outcome in run_each(work, url, concurrency, read_only=False)
    ]

    def report() -> None:
        for memory in found:
            done = memory.compacted
            said = f"history from {done.floor}, {done.log_deleted} commits removed" if done else "destroyed"
            out.print(f"{memory.url}: {memory.error.message if memory.error and not memory.destroyed else said}")

    emit(found, as_json, report)
    if any(memory.error and not memory.destroyed for memory in found):
        raise typer.Exit(EXIT_PROBLEMS)


@command()
def stats(url: Url, every: Every = False, concurrency: Concurrency = 8, as_json: Json = False) -> None:
    """Files, bytes, commits, history floor and checkpoint age.

    With --all, of every memory under URL, a few at once, one line each; exit 1 when one cannot be read.
    Example: bucket-memory stats s3://my-memories/team
    Example: bucket-memory stats s3://my-memories/users --all
    """
    if every:
        _stats_all(url, concurrency, as_json)
        return
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


def _stats_all(url: str, concurrency: int, as_json: bool) -> None:
    from .output import MemoryStats

    found = [
        MemoryStats(
            **reported(outcome),
            stats=outcome.result,
        )
        for outcome in run_each(lambda admin: admin.stats(), url, concurrency)
    ]

    def report() -> None:
        for memory in found:
            if memory.stats is None:
                out.print(
                    f"{memory.url}: {'destroyed' if memory.destroyed else memory.error.message if memory.error else ''}"
                )
                continue
            stats = memory.stats
            out.print(f"{memory.url}: {stats.files} files, {_sized(stats.bytes)}, head {stats.head}")
        out.print(f"{len(found)} memories, {_sized(sum(memory.stats.bytes for memory in found if memory.stats))}")

    emit(found, as_json, report)
    # A memory that could not be read is a failure of the command, as in verify and compact --all.
    if any(memory.error and not memory.destroyed for memory in found):
        raise typer.Exit(EXIT_PROBLEMS)


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
    done = run(lambda admin: admin.recover(None, origin=who), url, new_ok=True, says_versioning=True)
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


def _sized(count: int) -> str:
    """A number of bytes as people read it: 27 bytes, 4.2 KiB, 32 MiB (binary units, as quotas are set)."""
    size, unit = float(count), "bytes"
    for bigger in ("KiB", "MiB", "GiB", "TiB"):
        if size < 1024:
            break
        size, unit = size / 1024, bigger
    return f"{count} bytes" if unit == "bytes" else f"{size:.1f} {unit}".replace(".0 ", " ")
