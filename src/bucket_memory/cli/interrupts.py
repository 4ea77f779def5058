"""What a command stopped by Ctrl-C says it left behind, in one line, with exit code 130.

A first Ctrl-C cancels the command's work where it waits (asyncio's own handler would do the same,
but a failure raised while the work unwinds, such as a client's `aclose()` of a generator still
running, then replaced the interrupt); a second ends the process at once. Whatever was under way,
the command then reads the memory's log: a commit made since the command started, by its origin
(as the commit's author or as an intent another process folded in), is the change that landed;
none, and nothing was changed. A command that only reads says so without asking."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from a13n_harness.providers.memory import Origin

    from ..format.codec import Commit

EXIT_INTERRUPTED = 130  # 128 + SIGINT, as a shell reports a process Ctrl-C ended
_RECENT_COMMITS = 32  # a command's own commits are among the last few of the log when it is stopped
_CHECK_SECONDS = 30.0


@dataclass(slots=True)
class _Session:
    """What this process did that an interrupt must account for: the memory it began to change (its
    URL and when), the origins it named, and whether the work was interrupted."""

    changing: tuple[str, datetime] | None = None
    origins: list[Origin] = field(default_factory=list)
    interrupted: bool = False


_session = _Session()


def changing(url: str) -> None:
    """A command begins to change the memory at `url` (the first time only: its start is the bound)."""
    if _session.changing is None:
        _session.changing = (url, datetime.now(UTC) - timedelta(milliseconds=1))


def named(origin: Origin) -> None:
    """An origin the command's changes carry."""
    _session.origins.append(origin)


def interrupted() -> bool:
    return _session.interrupted


@contextmanager
def cancelled_on_interrupt() -> Iterator[None]:
    """Inside a running event loop: Ctrl-C cancels the current task (and is remembered); a second
    Ctrl-C ends the process at once."""
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    assert task is not None

    def interrupt() -> None:
        if _session.interrupted:
            print("interrupted again: stopped without checking what landed", file=sys.stderr, flush=True)
            os._exit(EXIT_INTERRUPTED)
        _session.interrupted = True
        task.cancel()

    try:
        loop.add_signal_handler(signal.SIGINT, interrupt)
    except (NotImplementedError, RuntimeError, ValueError):  # not the main thread (tests in-process), no signals
        yield
        return
    try:
        yield
    finally:
        loop.remove_signal_handler(signal.SIGINT)


def outcome() -> str:
    """The line an interrupted command prints: what landed of its change, read from the log."""
    if _session.changing is None:
        return "interrupted: nothing was changed"
    url, started = _session.changing
    try:
        landed = asyncio.run(asyncio.wait_for(_landed(url, started), _CHECK_SECONDS))
    except (Exception, KeyboardInterrupt) as error:
        return (
            f"interrupted; could not read what landed ({type(error).__name__}): "
            f"`bucket-memory log {url}` shows whether its commit is there"
        )
    if not landed:
        return "interrupted: nothing was changed"
    return f"interrupted after commit {', '.join(map(str, landed))} landed (`bucket-memory log {url}` shows it)"


async def _landed(url: str, started: datetime) -> list[int]:
    from ..connect import open_store
    from ..format.wire_values import moment_of

    async with open_store(url, read_only=True) as store:
        reader = store.log.reader
        listed = (await reader.list_log())[-_RECENT_COMMITS:]
        commits = await reader.fetch_commits(listed)
    return [
        seq
        for (seq, _), commit in zip(listed, commits, strict=True)
        if moment_of(commit.time) >= started and _ours(commit)
    ]


def _ours(commit: Commit) -> bool:
    authors = {(commit.origin.principal_id, commit.origin.run_id)}
    authors |= {(change.origin.principal_id, change.origin.run_id) for change in commit.changes if change.origin}
    return any((origin.principal_id, origin.run_id) in authors for origin in _session.origins)
