"""The commit log: keeping the head fresh, group commit, and create / settle / fence.

Commit N lives at `log/<N>.json` and exists exactly when it is committed. A writer validates its
change against the state at head H and creates `log/H+1` with put-if-absent; success proves H was
the head. The protocol's invariants, cited by number in the code (docs/design.md argues each):

1. A commit is created only at head + 1 of a state that every plan in it ran on.
2. The half-grace rule: a head confirmed more than G/2 ago (G, the grace period) is re-confirmed
   by a LIST, never by a GET, before a read is served and before every create attempt, the fence
   included, because compaction may have deleted the keys after it.
3. The kept anchor: compaction keeps the anchor checkpoint's own log object, so a LIST after a
   stale head meets a key past the gap and never mistakes an empty listing for a current head.
4. Nothing after the newest checkpoint, nor anything younger than G, is ever deleted.
5. A refusal, or a plan that changes nothing, is trusted only against a head proven current
   during the call.
6. An ambiguous create is settled by reading the key back (the commit id says whose it is); when
   that keeps failing, an empty fence commit at the same seq settles it; when even that cannot be
   settled the caller gets `write_unconfirmed`, never a false "not written". A key found holding
   our commit proves the head only as of our first attempt, not as of the attempt that found it.
7. Housekeeping (checkpoints, compaction) runs after callers have their outcomes, and its failures
   never reach them.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import random
import time
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from typing import NamedTuple

from a13n_harness.providers.memory import FileFormat, MemoryStoreError, Origin

from . import deadline, telemetry
from .batch import Plan, Request, consume, fail, plan_batch, resolve
from .codec import Commit, CorruptObjectError, Purge, log_key, off_loop, text_bytes
from .head import Head
from .objects import ObjectStore
from .options import LogOptions
from .reader import LogReader
from .retry import backoff, within_deadline
from .state import State

logger = logging.getLogger(__name__)


FENCE_RUN = "bucket-memory:fence"
# Keys a writer whose create lost reads at once, from the winner's on.
LOSER_READS = 4


class _Placed(NamedTuple):
    """What one create attempt found at its key: the commits from there on as far as read (none:
    not known yet), when the last was proven the head (None: not proven), and when it was sent."""

    run: list[Commit]
    proven_at: float | None
    sent: float


class _Overtaken(Exception):
    """The key this writer meant to create lies below what compaction has already removed."""


def unconfirmed(location: str, seq: int) -> MemoryStoreError:
    return MemoryStoreError(
        "write_unconfirmed",
        f"{location} did not confirm a commit near seq {seq}; the write may or may not have happened. "
        "Read the file before trying again.",
    )


class CommitLog:
    """One memory's log on an object store: fresh reads, and mutations made by group commit.

    Reads call `fresh_state()`; mutations call `commit(plan, origin)`, where `plan` validates
    against the state and returns the changes (or none, for a write that changes nothing).
    One lock serializes catch-up and commits within the process; mutations that arrive while a
    commit is under way are made together in the next one. `after_commit` is called, outside
    the commit path, after every commit (housekeeping hooks in there). A `read_only` log refuses
    every change before it sends a request.
    """

    def __init__(
        self, objects: ObjectStore, *, format: FileFormat, options: LogOptions | None = None, read_only: bool = False
    ) -> None:
        self.options = options or LogOptions()
        self.read_only = read_only
        self.reader = LogReader(objects, format=format, attempts=self.options.request_attempts)
        self.head = Head(self.reader, self.options)
        self.after_commit: Callable[[bool], Awaitable[None]] | None = None
        self._clock = self.options.clock
        self._housekeeping_due = self._purge_pending = False
        self._create_seconds = 0.0  # how long the last create request took: the length of a round
        # Bound to the event loop that uses the log (see _on_this_loop); the cached head is not.
        self._loop: weakref.ref[asyncio.AbstractEventLoop] | None = None
        self._lock = asyncio.Lock()
        self._waiting: list[Request] = []
        self._committer: asyncio.Task[None] | None = None
        self._housekeeper: asyncio.Task[None] | None = None

    @property
    def objects(self) -> ObjectStore:
        return self.reader.objects

    @property
    def format(self) -> FileFormat:
        return self.reader.format

    @property
    def location(self) -> str:
        return self.reader.location

    @property
    def cached_state(self) -> State | None:
        """The state as last loaded, without any request (None before the first load)."""
        return self.head.cached

    def _on_this_loop(self) -> None:
        """Make the lock, the queue and the tasks anew when the log is first used on another event
        loop (a handler calling `asyncio.run` per invocation); the cached head carries over."""
        loop = asyncio.get_running_loop()
        previous = self._loop() if self._loop is not None else None
        if previous is loop:
            return
        if previous is not None and previous.is_running():
            raise MemoryStoreError(
                "unavailable",
                f"This store of {self.location} is in use on another event loop, in another thread. "
                "Open one store per thread.",
            )
        self._loop = weakref.ref(loop)
        self._lock = asyncio.Lock()
        self._waiting, self._committer, self._housekeeper = [], None, None

    def check_writable(self) -> None:
        """Refuse, with `forbidden`, a change to a log opened read-only."""
        if self.read_only:
            raise MemoryStoreError(
                "forbidden", f"{self.location} was opened read-only; open it without read_only to change it."
            )

    @asynccontextmanager
    async def exclusive(self) -> AsyncIterator[None]:
        """Hold off this process's catch-ups and commits (while recovery re-creates objects)."""
        self._on_this_loop()
        async with self._lock:
            yield

    def forget(self) -> None:
        """Drop the cached state: the next use loads the memory afresh (after recovery re-created objects)."""
        self.head.forget()

    async def fresh_state(self) -> State:
        """The state at the head as of some moment during this call (or within `max_staleness`)."""
        called = self._clock()
        self._on_this_loop()
        with deadline.within(self.options.operation_timeout):
            return await self._fresh_state(called)

    async def _fresh_state(self, called: float) -> State:
        async with self._lock:
            await self.head.loaded()
            # A confirmation sent after this call began is as good as our own probe.
            confirmed_at = self.head.confirmed_at
            if confirmed_at < called and self._clock() - confirmed_at > self.options.max_staleness:
                await self.head.probe()
            return self.head.current()  # a probe may have reloaded the memory into a new state

    async def proven_state(self) -> State:
        """The state at a head proven current now (a probe, whatever `max_staleness` allows)."""
        self._on_this_loop()
        with deadline.within(self.options.operation_timeout):
            async with self._lock:
                await self.head.loaded()
                await self.head.probe()
                return self.head.current()

    async def commit(self, plan: Plan, origin: Origin) -> int | None:
        """Commit what `plan` returns at the head; the new seq, or None when it returned no change.

        Calls that arrive while another commit is under way are made together in the next commit:
        their plans run in arrival order, each against the state the ones before it leave. The
        commit runs in a task of its own, so a caller cancelled meanwhile leaves the others theirs.
        A batch's requests must all be sent by the earliest deadline among its callers.
        """
        self.check_writable()
        self._on_this_loop()
        end = deadline.end_after(self.options.operation_timeout)
        request = Request(plan, origin, asyncio.get_running_loop().create_future(), end, telemetry.current())
        self._waiting.append(request)
        if self._committer is None or self._committer.done():
            self._committer = asyncio.create_task(self._drain())
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
        async with self._lock:
            while self._waiting:
                batch, self._waiting = self._waiting, []
                try:
                    with deadline.until(min(request.deadline for request in batch)), telemetry.tallied() as spent:
                        try:
                            commit = await self._commit_batch(batch)
                        finally:  # each caller's operation waited on the whole commit
                            for request in batch:
                                if request.tally is not None:
                                    request.tally.add(spent)
                except MemoryStoreError as error:
                    fail(batch, error)
                except Exception:  # a failure nobody mapped: a message for the callers, the traceback in the log
                    logger.exception("%s: unexpected failure while committing", self.location)
                    fail(batch, unconfirmed(self.location, self.head.seq + 1))
                except asyncio.CancelledError:
                    fail(batch, unconfirmed(self.location, self.head.seq + 1))  # the loop is closing mid-commit
                    raise
                except BaseException as error:  # a simulated crash: the callers die with it
                    fail(batch, error)
                    return
                else:
                    committed = committed or commit is not None
                    purged = purged or (commit is not None and any(isinstance(c, Purge) for c in commit.changes))
        if committed and self.after_commit is not None:
            self._housekeeping_due, self._purge_pending = True, self._purge_pending or purged
            if self._housekeeper is None or self._housekeeper.done():
                self._housekeeper = asyncio.create_task(self._housekeep(self.after_commit))

    async def _housekeep(self, work: Callable[[bool], Awaitable[None]]) -> None:
        """Run housekeeping until no commit asks for more, apart from the commit path (invariant 7)."""
        while self._housekeeping_due:
            purged, self._housekeeping_due, self._purge_pending = self._purge_pending, False, False
            try:
                with telemetry.tallied():  # not the operation whose commit started it: that one is over
                    await work(purged)
            except Exception:
                logger.exception("%s: housekeeping failed; a later commit tries again", self.location)

    async def settle(self) -> None:
        """Wait until housekeeping started by earlier commits is done (before a process exits, or in tests).

        Housekeeping failures were logged; only a crash (a `BaseException` such as a test's
        simulated one) is raised here.
        """
        self._on_this_loop()
        for task in (self._committer, self._housekeeper):
            if task is not None:
                await asyncio.wait([task])
                if not task.cancelled() and (crash := task.exception()) is not None:
                    raise crash

    async def _commit_batch(self, batch: Sequence[Request]) -> Commit | None:
        """Plan every request of the batch and commit their changes as one commit (invariants 1, 5)."""
        proven = False
        probe_after = self.options.probe_before_write_after
        if probe_after is not None and self._clock() - self.head.confirmed_at > probe_after:
            await self.head.loaded()
            await self.head.probe()  # a head this old is likely stale: one GET, not a failed PUT and a catch-up
        for attempt in range(self.options.commit_attempts):
            state = await self.head.loaded()  # invariant 2: plan on a head recent enough to trust
            seq = state.head + 1
            scratch, planned = plan_batch(state, batch, seq, edits=self.options.store_edits)
            accepted = [
                (request, changes)
                for request, changes in zip(batch, planned, strict=True)
                if changes and not isinstance(changes, MemoryStoreError)
            ]
            if not accepted:
                if not proven:  # invariant 5
                    await self.head.probe()
                    proven = True
                    continue
                resolve(batch, planned, None)
                return None
            first = accepted[0][0].origin
            changes = tuple(
                change if request.origin == first else change.model_copy(update={"origin": request.origin})
                for request, request_changes in accepted
                for change in request_changes
            )
            # The server's clock, as the object store last saw it, and never before the head (seq_at
            # and recovery look commits up by time, so times must rise with seqs).
            at = max(await self.objects.now(), state.head_time)
            make = functools.partial(Commit.create, seq, state.head_hash, changes, first, at=at)
            commit = await off_loop(text_bytes(changes), make)
            if not await self._create(commit):
                telemetry.count("conflicts")
                proven = True  # _create caught up with reads sent after our attempt lost.
                # Each round has one winner. After its first loss a writer waits a random part of one
                # create, so that the next round has fewer contenders; after later losses it retries
                # at once, ahead of those that lost fewer rounds. Against waiting longer after each
                # loss, at 16 writers and half the one-log bound (make bench), the p99 fell from 30
                # to 15 request latencies and PUTs per write from 3.0 to 2.7; with every writer
                # writing flat out, commits/s held and PUTs per commit rose from 5.4 to 8.8.
                if attempt == 0:
                    await asyncio.sleep(deadline.clip(random.uniform(0, max(self._create_seconds, 0.001))))
                continue
            scratch.advance(commit)
            self.head.advance(scratch)
            telemetry.count("commits")
            resolve(batch, planned, seq)
            return commit
        raise MemoryStoreError(
            "unavailable",
            f"{self.options.commit_attempts} commits in a row lost to other writers of {self.location}; try again.",
        )

    async def _create(self, commit: Commit) -> bool:
        """Create `log/<seq>` with our commit: True if ours landed, False if another writer's did (invariant 6)."""
        doubtful = fenced = False  # doubtful: an attempt may have landed without our knowing
        try:
            for candidate in (commit, None):
                # When our attempts never settled, a fence at the same seq will; made only then.
                candidate = candidate or Commit.create(
                    commit.seq, commit.prev, (), Origin(run_id=FENCE_RUN), at=commit.moment.timestamp()
                )
                # When the key turns out to hold the candidate, the head it proves is as of the first
                # attempt: an earlier attempt may have landed, and others committed after it since.
                first_sent: float | None = None
                for attempt in range(self.options.request_attempts):
                    try:
                        placed = await self._place(candidate)
                    except _Overtaken:
                        return await self._overtaken(doubtful)
                    first_sent = placed.sent if first_sent is None else first_sent
                    if not placed.run:
                        doubtful = True
                        telemetry.count("retries")
                        await asyncio.sleep(deadline.clip(backoff(attempt)))
                        continue
                    holder = placed.run[0]
                    if holder.id == commit.id:
                        self.head.confirmed_at = first_sent
                        return True
                    self.head.apply(holder)
                    if holder.id != candidate.id:
                        for later in placed.run[1:]:
                            self.head.apply(later)
                        if placed.proven_at is None:
                            await self.head.catch_up()
                        else:
                            self.head.confirmed_at = placed.proven_at
                        return False
                    self.head.confirmed_at, fenced = first_sent, True  # our fence landed, so our commit never can
                    break
                if fenced:
                    break
        except MemoryStoreError as error:
            if doubtful and error.code != "write_unconfirmed" and not isinstance(error, CorruptObjectError):
                raise unconfirmed(self.location, commit.seq) from None
            raise
        if fenced:
            raise MemoryStoreError(
                "unavailable", f"{self.location} kept failing; nothing was written. Try again later."
            )
        raise unconfirmed(self.location, commit.seq)

    async def _place(self, commit: Commit) -> _Placed:
        """One attempt to create the commit's key, and what the key then holds. A head too old to
        trust is first re-confirmed by listing (invariant 2). When another writer's commit is there,
        the keys after it are read in the same round trip: a loser is usually only a few commits
        behind, and one 404 among them proves its new head without a listing."""
        key = log_key(commit.seq)
        if self.head.is_old():  # invariant 2, before every attempt
            sent = self._clock()
            listed = await self.reader.list_log(after=commit.seq - 1)
            if listed and listed[0][0] != commit.seq:
                raise _Overtaken
            if listed:
                return _Placed([await self._holder(commit.seq)], None, sent)
            self.head.confirmed_at = sent
        sent = self._clock()
        what = f"Committing {self.location}/{key}"
        started = time.monotonic()  # real time, even where tests move the log's clock by hand
        encoded = commit.encode()
        telemetry.count("bytes_written", len(encoded))
        try:
            created = await within_deadline(lambda: self.objects.create(key, encoded), what=what)
            self._create_seconds = time.monotonic() - started
            if created:
                return _Placed([commit], None, sent)
        except MemoryStoreError:
            raise
        except Exception:  # TransientError or unmapped: the create may have landed, so read the key back
            try:
                data = await within_deadline(lambda: self.objects.get(key), what=what)
            except Exception:
                return _Placed([], None, sent)
            return _Placed([await Commit.read(self.location, key, data)] if data is not None else [], None, sent)
        run, proven_at = await self.head.run_from(commit.seq, LOSER_READS)
        if not run:
            raise _Overtaken  # refused yet absent: deleted under a head older than we knew
        return _Placed(run, proven_at, sent)

    async def _holder(self, seq: int) -> Commit:
        holder = await self.reader.commit(seq)
        if holder is None:
            raise _Overtaken  # refused yet absent: deleted under a head older than we knew
        return holder

    async def _overtaken(self, doubtful: bool) -> bool:
        """Compaction passed our head: reload. If an earlier attempt may have landed, its fate is lost with it."""
        await self.head.cold_start()
        if doubtful:
            raise unconfirmed(self.location, self.head.seq)
        return False
