"""What a command stopped by Ctrl-C says it left behind, in one line, with exit code 130.

A first Ctrl-C cancels the command's work where it waits (asyncio's own handler would do the same,
but a failure raised while the work unwinds, such as a client's `aclose()` of a generator still
running, then replaced the interrupt); a second ends the process at once. Whatever was under way,
the command then reads the memory's log: a commit made since the command started, by its origin
(as the commit's author or as an intent another process folded in), is the change that landed.
An intent of the command's (a write that met others' and was published for whoever commits next
to fold in) that no commit has settled yet may still land, until the head passes its window: that
is said, never "nothing was changed". A command that only reads says so without asking."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from a13n_harness.providers.memory import Origin

    from ..fleet.intents import Intent
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
    intents: dict[str, tuple[str, int]] = field(default_factory=dict)  # unsettled ones: key -> (id, base)
    interrupted: bool = False


_session = _Session()


def changing(url: str) -> None:
    """A command begins to change the memory at `url` (the first time only: its start is the bound)."""
    if _session.changing is None:
        _session.changing = (url, datetime.now(UTC) - timedelta(milliseconds=1))


def named(origin: Origin) -> None:
    """An origin the command's changes carry."""
    _session.origins.append(origin)


def unsettled(intents: Iterable[Intent]) -> None:
    """Intents the command published whose fate it had not learned when its store closed."""
    _session.intents |= {intent.key: (intent.id, intent.base) for intent in intents}


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
        landed, pending = asyncio.run(asyncio.wait_for(_landed(url, started), _CHECK_SECONDS))
    except (Exception, KeyboardInterrupt) as error:
        return (
            f"interrupted; could not read what landed ({type(error).__name__}): "
            f"`bucket-memory log {url}` shows whether its commit is there"
        )
    said = f"interrupted after commit {', '.join(map(str, landed))} landed" if landed else "interrupted"
    if pending:
        key, until = pending[0]
        more = f" (and {len(pending) - 1} more)" if len(pending) > 1 else ""
        return (
            f"{said}: the write may still land: its intent {key}{more} is pending until commit {until}, "
            f"and whoever commits to the memory before then may fold it in (`bucket-memory log {url}` "
            "shows whether it did)"
        )
    if not landed:
        return "interrupted: nothing was changed"
    return f"{said} (`bucket-memory log {url}` shows it)"


async def _landed(url: str, started: datetime) -> tuple[list[int], list[tuple[str, int]]]:
    """The seqs of the commits of ours since `started`, and the intents of ours no commit has
    settled whose window is still open: (key, the last commit that may settle it)."""
    from ..connect import open_store
    from ..format.wire_values import moment_of
    from ..state.folds import FOLD_WINDOW  # not at the top: --help imports nothing of the store

    async with open_store(url, read_only=True) as store:
        reader = store.reader
        listed = await reader.list_log()
        head = listed[-1][0] if listed else 0
        bases = [base for _, base in _session.intents.values()]
        # The recent commits, and those of every window an intent of ours may have been settled in.
        wanted = [
            (seq, key)
            for n, (seq, key) in enumerate(listed)
            if n >= len(listed) - _RECENT_COMMITS or any(base < seq <= base + FOLD_WINDOW for base in bases)
        ]
        commits = await reader.fetch_commits(wanted)
    landed = [
        seq
        for (seq, _), commit in zip(wanted, commits, strict=True)
        if moment_of(commit.time) >= started and _ours(commit)
    ]
    settled = {fold.id for commit in commits for fold in commit.folded or ()}
    pending = [
        (key, base + FOLD_WINDOW)
        for key, (intent_id, base) in _session.intents.items()
        if intent_id not in settled and head < base + FOLD_WINDOW
    ]
    return landed, pending


def _ours(commit: Commit) -> bool:
    authors = {(commit.origin.principal_id, commit.origin.run_id)}
    authors |= {(change.origin.principal_id, change.origin.run_id) for change in commit.changes if change.origin}
    return any((origin.principal_id, origin.run_id) in authors for origin in _session.origins)
