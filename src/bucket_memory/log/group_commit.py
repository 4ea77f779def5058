"""The group-commit queue of one log: mutations that arrive while a commit is under way are made
together in the next one, and each batch is committed attempt after attempt: the one retry loop of
the commit path (`Committer.attempt` makes one attempt and answers what became of it).

The invariants cited by number are those of `commit_log`'s module docstring.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Callable

from a13n_harness.providers.memory import MemoryStoreError

from ..format.changes import Erase, Purge
from ..format.codec import Commit
from ..runtime import deadline, telemetry
from .batch import Answer, Lost, Request, consume, fail
from .committer import Committed, Committer, Nothing, Stale, unconfirmed

logger = logging.getLogger(__name__)


class GroupCommit:
    """The requests of one log waiting for the next batch, on one event loop, and the task that
    drains them, batch after batch, under the log's `lock`. A batch is planned again after each
    lost race, up to `commit_attempts` losses in a row, except for its requests that do not
    `retry` (answered `Lost`); `done(purged)` is called after a drain that committed.
    """

    def __init__(self, committer: Committer, lock: asyncio.Lock, done: Callable[[bool], None]) -> None:
        self.committer = committer
        self.options = committer.options
        self.lock = lock
        self.task: asyncio.Task[None] | None = None  # the drain under way, if any
        self._done = done
        self._waiting: list[Request] = []

    async def submit(self, request: Request) -> Answer:
        """Queue `request` for the next batch and wait for its answer. The commit runs in a task of
        its own, so a caller cancelled meanwhile leaves the others theirs."""
        self._waiting.append(request)
        if self.task is None or self.task.done():
            self.task = asyncio.create_task(self._drain())
        try:
            return await asyncio.shield(request.outcome)
        except asyncio.CancelledError:
            if request in self._waiting:  # not taken into a commit yet: it never happens
                self._waiting.remove(request)
            # Taken: its outcome arrives later, with nobody to read it.
            request.outcome.add_done_callback(consume)
            raise

    async def _drain(self) -> None:
        """Commit the waiting requests, batch after batch, then run housekeeping (invariant 7)."""
        committed = purged = False
        async with self.lock:
            while self._waiting:
                batch, self._waiting = self._waiting, []
                try:
                    with deadline.until(min(request.deadline for request in batch)), telemetry.tallied() as spent:
                        try:
                            commit = await self._committed(batch)
                        finally:  # each caller's operation waited on the whole commit
                            for request in batch:
                                if request.tally is not None:
                                    request.tally.add(spent)
                except MemoryStoreError as error:
                    fail(batch, error)
                except Exception:  # a failure nobody mapped: a message for the callers, the traceback in the log
                    logger.exception("%s: unexpected failure while committing", self.committer.location)
                    fail(batch, self._unconfirmed())
                except asyncio.CancelledError:
                    fail(batch, self._unconfirmed())  # the loop is closing mid-commit
                    raise
                except BaseException as error:  # a simulated crash: the callers die with it
                    fail(batch, error)
                    return
                else:
                    committed = committed or commit is not None
                    # A purge or an erasure is followed by a checkpoint at once.
                    ends = commit is not None and any(isinstance(change, Purge | Erase) for change in commit.changes)
                    purged = purged or ends
        if committed:
            self._done(purged)

    async def _committed(self, batch: list[Request]) -> Commit | None:
        """Commit the batch, attempt after attempt: its commit, or None when nothing needed one or
        every request left after a lost race was answered `Lost`. The one loop of the group commit:
        a lost race plans the requests that retry again, up to `commit_attempts` losses in a row."""
        head, clock = self.committer.head, self.options.clock
        since = clock()  # every request of the batch was waiting by now
        probe_after = self.options.probe_before_write_after
        if probe_after is not None and clock() - head.confirmed_at > probe_after:
            await head.loaded()
            await head.probe()  # a head this old is likely stale: one GET, not a failed PUT and a catch-up
        losses = 0
        while batch:
            # A batch none of whose requests is planned again needs only the winner after a loss.
            match await self.committer.attempt(batch, since=since, replanning=any(r.retries for r in batch)):
                case Committed(commit):
                    return commit
                case Nothing():
                    return None
                case Stale():
                    continue
                case Lost() as lost:
                    for request in batch:
                        if not request.retries and not request.outcome.done():
                            request.outcome.set_result(lost)
                    batch = [request for request in batch if request.retries]
                    losses += 1
                    if batch and losses >= self.options.commit_attempts:
                        raise MemoryStoreError(
                            "unavailable",
                            f"{losses} commits in a row lost to other writers of {self.committer.location}; try again.",
                        )
                    if batch:
                        await self._after_loss(losses)
        return None

    async def _after_loss(self, losses: int) -> None:
        """Each round has one winner. After its first loss a writer waits a random part of one create,
        so that the next round has fewer contenders; after later losses it retries at once, ahead of
        those that lost fewer rounds, so that the longest waits are cut rather than the mean (the
        measurement against waiting longer after each loss: docs/performance.md, "Numbers behind
        the code")."""
        if losses == 1:
            round_seconds = self.committer.settler.round_seconds
            await asyncio.sleep(deadline.clip(random.uniform(0, max(round_seconds, 0.001))))

    def _unconfirmed(self) -> MemoryStoreError:
        return unconfirmed(self.committer.location, self.committer.head.seq + 1)
