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
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass

from a13n_harness.providers.memory import FileFormat, MemoryStoreError, Origin

from .codec import (
    CHECKPOINT_PREFIX,
    LOG_PREFIX,
    Change,
    Commit,
    CorruptObjectError,
    Purge,
    key_seq,
    log_key,
    off_loop,
    text_bytes,
)
from .objects import ObjectInfo, ObjectStore
from .retry import FETCH_CONCURRENCY, backoff, gather_bounded, retrying
from .state import State

logger = logging.getLogger(__name__)

type Plan = Callable[[State], Sequence[Change]]

FENCE_RUN = "bucket-memory:fence"


@dataclass(frozen=True, slots=True)
class LogOptions:
    """Tuning of one memory's log.

    `max_staleness` lets reads skip the freshness probe for that many seconds (0: every read is
    fresh). A head confirmed longer ago than half of `grace_period` is re-confirmed by listing
    (invariant 2). A checkpoint is written after `checkpoint_min_commits` commits once the bytes
    committed since the last one reach the live size, and after `checkpoint_max_commits` always.
    Compaction keeps at least `retain_commits` commits and those younger than `retain_seconds` as
    history; with `auto_compact` the writer of a checkpoint compacts too. `clock` is the local
    monotonic clock heads are aged by (tests replace it).
    """

    max_staleness: float = 0.0
    grace_period: float = 3600.0
    checkpoint_min_commits: int = 32
    checkpoint_max_commits: int = 512
    max_tombstones: int = 10_000
    retain_commits: int = 1000
    retain_seconds: float = 7 * 24 * 3600.0
    auto_compact: bool = True
    commit_attempts: int = 1000
    request_attempts: int = 6
    clock: Callable[[], float] = time.monotonic


@dataclass(slots=True)
class _Request:
    """A caller's mutation waiting to be committed, alone or with others."""

    plan: Plan
    origin: Origin
    outcome: asyncio.Future[int | None]


class _Overtaken(Exception):
    """The key this writer meant to create lies below what compaction has already removed."""


def unconfirmed(location: str, seq: int) -> MemoryStoreError:
    return MemoryStoreError(
        "write_unconfirmed",
        f"{location} did not confirm a commit near seq {seq}; the write may or may not have happened. "
        "Read the file before trying again.",
    )


class CommitLog:
    """One memory's log on an object store, with the state at its head cached in memory.

    Reads call `fresh_state()`; mutations call `commit(plan, origin)`, where `plan` validates
    against the state and returns the changes (or none, for a write that changes nothing).
    One lock serializes catch-up and commits within the process; mutations that arrive while a
    commit is under way are made together in the next one. `after_commit` is called, outside
    the commit path, after every commit (housekeeping hooks in there).
    """

    def __init__(self, objects: ObjectStore, *, format: FileFormat, options: LogOptions | None = None) -> None:
        self.objects = objects
        self.format = format
        self.options = options or LogOptions()
        self.after_commit: Callable[[bool], Awaitable[None]] | None = None
        self._state: State | None = None
        self._confirmed_at = float("-inf")
        self._clock = self.options.clock
        self._lock = asyncio.Lock()
        self._waiting: list[_Request] = []
        self._committer: asyncio.Task[None] | None = None
        self._housekeeper: asyncio.Task[None] | None = None
        self._housekeeping_due = self._purge_pending = False

    @property
    def location(self) -> str:
        return self.objects.location

    @property
    def cached_state(self) -> State | None:
        """The state as last loaded, without any request (None before the first load)."""
        return self._state

    @asynccontextmanager
    async def exclusive(self) -> AsyncIterator[None]:
        """Hold off this process's catch-ups and commits (while recovery re-creates objects)."""
        async with self._lock:
            yield

    def forget(self) -> None:
        """Drop the cached state: the next use loads the memory afresh (after recovery re-created objects)."""
        self._state = None

    async def fresh_state(self) -> State:
        """The state at the head as of some moment during this call (or within `max_staleness`)."""
        called = self._clock()
        async with self._lock:
            await self._loaded()
            # A confirmation sent after this call began is as good as our own probe.
            if self._confirmed_at < called and self._clock() - self._confirmed_at > self.options.max_staleness:
                await self._probe()
            return self._current()  # a probe may have reloaded the memory into a new state

    async def proven_state(self) -> State:
        """The state at a head proven current now (a probe, whatever `max_staleness` allows)."""
        async with self._lock:
            await self._loaded()
            await self._probe()
            return self._current()

    async def commit(self, plan: Plan, origin: Origin) -> int | None:
        """Commit what `plan` returns at the head; the new seq, or None when it returned no change.

        Calls that arrive while another commit is under way are made together in the next commit:
        their plans run in arrival order, each against the state the ones before it leave. The
        commit runs in a task of its own, so a caller cancelled meanwhile leaves the others theirs.
        """
        request = _Request(plan, origin, asyncio.get_running_loop().create_future())
        self._waiting.append(request)
        if self._committer is None or self._committer.done():
            self._committer = asyncio.create_task(self._drain())
        try:
            return await asyncio.shield(request.outcome)
        except asyncio.CancelledError:
            if request in self._waiting:  # not taken into a commit yet: it never happens
                self._waiting.remove(request)
            # Taken: its outcome arrives later, with nobody to read it.
            request.outcome.add_done_callback(_consume)
            raise

    async def _drain(self) -> None:
        """Commit the waiting requests, batch after batch, then run housekeeping (invariant 7)."""
        committed = purged = False
        async with self._lock:
            while self._waiting:
                batch, self._waiting = self._waiting, []
                try:
                    commit = await self._commit_batch(batch)
                except MemoryStoreError as error:
                    _fail(batch, error)
                except Exception:  # a failure nobody mapped: a message for the callers, the traceback in the log
                    logger.exception("%s: unexpected failure while committing", self.location)
                    _fail(batch, unconfirmed(self.location, self._head() + 1))
                except asyncio.CancelledError:
                    _fail(batch, unconfirmed(self.location, self._head() + 1))  # the loop is closing mid-commit
                    raise
                except BaseException as error:  # a simulated crash: the callers die with it
                    _fail(batch, error)
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
                await work(purged)
            except Exception:
                logger.exception("%s: housekeeping failed; a later commit tries again", self.location)

    async def settle(self) -> None:
        """Wait until housekeeping started by earlier commits is done (before a process exits, or in tests).

        Housekeeping failures were logged; only a crash (a `BaseException` such as a test's
        simulated one) is raised here.
        """
        for task in (self._committer, self._housekeeper):
            if task is not None:
                await asyncio.wait([task])
                if not task.cancelled() and (crash := task.exception()) is not None:
                    raise crash

    def _head(self) -> int:
        return self._state.head if self._state is not None else 0

    async def _commit_batch(self, batch: Sequence[_Request]) -> Commit | None:
        """Plan every request of the batch and commit their changes as one commit (invariants 1, 5)."""
        await self._loaded()
        proven = False
        for attempt in range(self.options.commit_attempts):
            await self._ensure_recent()  # invariant 2: plan on a head recent enough to trust
            state = self._current()
            seq = state.head + 1
            # Every change is applied to a copy as it is planned: a change that breaks a rule is its
            # caller's error, and the commit holds only changes every reader can apply.
            scratch = state.copy()
            planned: list[Sequence[Change] | MemoryStoreError] = []
            for request in batch:
                try:
                    changes = tuple(request.plan(scratch))
                except MemoryStoreError as error:
                    planned.append(error)
                    continue
                try:
                    for change in changes:
                        scratch.apply_change(change, seq)
                except MemoryStoreError as error:
                    planned.append(error)
                    scratch = _applied(state, planned, seq)  # without what the refused request half applied
                    continue
                planned.append(changes)
            accepted = [
                (request, changes)
                for request, changes in zip(batch, planned, strict=True)
                if changes and not isinstance(changes, MemoryStoreError)
            ]
            if not accepted:
                if not proven:  # invariant 5
                    await self._probe()
                    proven = True
                    continue
                _resolve(batch, planned, None)
                return None
            first = accepted[0][0].origin
            changes = tuple(
                change if request.origin == first else change.model_copy(update={"origin": request.origin})
                for request, request_changes in accepted
                for change in request_changes
            )
            make = functools.partial(Commit.create, seq, state.head_hash, changes, first)
            commit = await off_loop(text_bytes(changes), make)
            started = time.monotonic()  # real time, even where tests move the log's clock by hand
            if not await self._create(commit):
                proven = True  # _create caught up with a listing sent after our attempt lost.
                # Each round has one winner. Losers wait a random part of one round (two after the
                # first loss) so that the next round has fewer contenders; longer waits lost more
                # throughput than they saved PUTs in benchmarks/ (16 writers: 30 commits/s, 14 with 16 rounds).
                round_trip = max(time.monotonic() - started, 0.001)
                await asyncio.sleep(random.uniform(0, round_trip * (2 if attempt else 1)))
                continue
            scratch.advance(commit)
            self._state = scratch
            _resolve(batch, planned, seq)
            return commit
        raise MemoryStoreError(
            "unavailable",
            f"{self.options.commit_attempts} commits in a row lost to other writers of {self.location}; try again.",
        )

    async def _loaded(self) -> State:
        if self._state is None:
            await self._cold_start()
        else:
            await self._ensure_recent()
        return self._current()

    def _current(self) -> State:
        assert self._state is not None, "the log is loaded before use"
        return self._state

    def _apply(self, commit: Commit, state: State | None = None) -> None:
        """Apply a commit to `state` (the cached one by default); a corrupt commit also drops the
        cached state, half applied as it is."""
        target = state if state is not None else self._current()
        try:
            target.apply(commit, self.location)
        except CorruptObjectError:
            if target is self._state:
                self._state = None
            raise

    def _head_is_old(self, now: float | None = None, *, since: float | None = None) -> bool:
        """Invariant 2: whether the cached head was confirmed (or `since` was) more than half the
        grace period ago."""
        confirmed = self._confirmed_at if since is None else since
        return (self._clock() if now is None else now) - confirmed > self.options.grace_period / 2

    async def _ensure_recent(self) -> None:
        if self._head_is_old():
            await self._catch_up()

    async def _probe(self) -> None:
        """Prove the cached head current with one GET of the next seq, catching up when it exists."""
        if self._head_is_old():
            await self._catch_up()
            return
        state = self._current()
        sent = self._clock()
        key = log_key(state.head + 1)
        data = await self.get(key)
        if data is None and self._head_is_old():
            await self._catch_up()  # answered (after retries) too late to prove anything: invariant 2
            return
        if data is None:
            self._confirmed_at = sent
            return
        self._apply(await Commit.read(self.location, key, data))
        await self._catch_up()

    async def _catch_up(self) -> None:
        """Apply every commit after the cached head, found by one listing; reload if compaction left a gap."""
        state = self._current()
        sent = self._clock()
        if not self.objects.ordered_listing and not self._head_is_old(sent):
            if await self._probe_forward(state, sent, since=self._confirmed_at):
                return
            sent = self._clock()
        listed = await self.list_log(after=state.head)
        if listed and listed[0][0] != state.head + 1:
            logger.info("%s: commits after %d were compacted; reloading from a checkpoint", self.location, state.head)
            await self._cold_start()
            return
        for commit in await self.fetch_commits(listed):
            self._apply(commit)
        self._confirmed_at = sent

    async def _probe_forward(self, state: State, sent: float, *, since: float) -> bool:
        """Catch up by GETs of the next seqs, a window at a time, until one is absent; whether that
        proved the head (False: list instead).

        For stores whose listing is unordered and has no start-after (S3 Express directory
        buckets). A 404 proves a key absent only when answered within half the grace period of
        `since`, the moment from which no key after `state.head` can have been compacted
        (invariant 2): a probe slowed by retries proves nothing.
        """
        while True:
            window = range(state.head + 1, state.head + 1 + FETCH_CONCURRENCY)
            found = await gather_bounded(window, lambda seq: self.get(log_key(seq)))
            for seq, data in zip(window, found, strict=True):
                if data is None:
                    if self._head_is_old(since=since):
                        return False
                    self._confirmed_at = sent
                    return True
                self._apply(await Commit.read(self.location, log_key(seq), data), state)
            sent = self._clock()

    async def _cold_start(self) -> None:
        """Load the newest checkpoint, then the log after it; the state is cached only once whole."""
        problem = "it kept changing (compaction running?)"
        for _ in range(self.options.request_attempts):
            sent = self._clock()
            checkpoints = await self.list_checkpoints()
            state = State(format=self.format)
            if checkpoints:
                loaded = await self.load_checkpoint(checkpoints[-1][1].key)
                if loaded is None:
                    continue  # compacted between the listing and the read
                state = loaded
            # Keys after the newest checkpoint are never compacted (invariant 4), so a timely 404 is proof.
            if not self.objects.ordered_listing and await self._probe_forward(state, sent, since=sent):
                self._state = state
                return
            listed = await self.list_log(after=state.head)
            if listed and listed[0][0] != state.head + 1:
                # Usually a newer checkpoint was written and the log below it compacted meanwhile.
                problem = f"its log jumps from commit {state.head} to {listed[0][0]} with no checkpoint between"
                continue
            for commit in await self.fetch_commits(listed):
                state.apply(commit, self.location)
            self._state, self._confirmed_at = state, sent
            return
        self._state = None
        raise MemoryStoreError(
            "unavailable",
            f"Cannot load {self.location}: {problem}. Try again; if it persists, run "
            f"`bucket-memory verify {self.location}`.",
        )

    async def load_checkpoint(self, key: str) -> State | None:
        """The state a checkpoint holds, or None if it is gone."""
        data = await self.get(key)
        if data is None:
            return None
        return await State.read_checkpoint(self.location, key, data, self.format)

    async def _create(self, commit: Commit) -> bool:
        """Create `log/<seq>` with our commit: True if ours landed, False if another writer's did (invariant 6)."""
        doubtful = fenced = False  # doubtful: an attempt may have landed without our knowing
        try:
            for candidate in (commit, None):
                # When our attempts never settled, a fence at the same seq will; made only then.
                candidate = candidate or Commit.create(commit.seq, commit.prev, (), Origin(run_id=FENCE_RUN))
                # When the key turns out to hold the candidate, the head it proves is as of the first
                # attempt: an earlier attempt may have landed, and others committed after it since.
                first_sent: float | None = None
                for attempt in range(self.options.request_attempts):
                    try:
                        holder, sent = await self._place(candidate)
                    except _Overtaken:
                        return await self._overtaken(doubtful)
                    first_sent = sent if first_sent is None else first_sent
                    if holder is None:
                        doubtful = True
                        await asyncio.sleep(backoff(attempt))
                        continue
                    if holder.id == commit.id:
                        self._confirmed_at = first_sent
                        return True
                    self._apply(holder)
                    if holder.id != candidate.id:
                        await self._catch_up()
                        return False
                    self._confirmed_at, fenced = first_sent, True  # our fence landed, so our commit never can
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

    async def _place(self, commit: Commit) -> tuple[Commit | None, float]:
        """One attempt to create the commit's key: the commit the key then holds (None: unknown yet),
        and when the attempt was sent. A head too old to trust is first re-confirmed by listing."""
        key = log_key(commit.seq)
        if self._head_is_old():  # invariant 2, before every attempt
            sent = self._clock()
            listed = await self.list_log(after=commit.seq - 1)
            if listed and listed[0][0] != commit.seq:
                raise _Overtaken
            if listed:
                return await self._holder(key), sent
            self._confirmed_at = sent
        sent = self._clock()
        try:
            if await self.objects.create(key, commit.encode()):
                return commit, sent
        except MemoryStoreError:
            raise
        except Exception:  # TransientError or unmapped: the create may have landed, so read the key back
            try:
                data = await self.objects.get(key)
            except Exception:
                return None, sent
            return (await Commit.read(self.location, key, data) if data is not None else None), sent
        return await self._holder(key), sent

    async def _holder(self, key: str) -> Commit:
        data = await self.get(key)
        if data is None:
            raise _Overtaken  # refused yet absent: deleted under a head older than we knew
        return await Commit.read(self.location, key, data)

    async def _overtaken(self, doubtful: bool) -> bool:
        """Compaction passed our head: reload. If an earlier attempt may have landed, its fate is lost with it."""
        await self._cold_start()
        if doubtful:
            raise unconfirmed(self.location, self._current().head)
        return False

    async def get(self, key: str) -> bytes | None:
        return await retrying(
            lambda: self.objects.get(key),
            what=f"Reading {self.location}/{key}",
            attempts=self.options.request_attempts,
        )

    async def list_keys(self, prefix: str, *, start_after: str | None = None) -> list[ObjectInfo]:
        return await retrying(
            lambda: self.objects.list(prefix, start_after=start_after),
            what=f"Listing {self.location}/{prefix}",
            attempts=self.options.request_attempts,
        )

    async def list_log(self, *, after: int = 0) -> list[tuple[int, ObjectInfo]]:
        """The commits in the log after seq `after`, with their seqs; keys the store never writes are ignored."""
        return _owned(await self.list_keys(LOG_PREFIX, start_after=log_key(after) if after else None))

    async def list_checkpoints(self) -> list[tuple[int, ObjectInfo]]:
        """The checkpoints, oldest first, with their seqs; keys the store never writes are ignored."""
        return _owned(await self.list_keys(CHECKPOINT_PREFIX))

    async def fetch_commits(self, listed: Sequence[tuple[int, ObjectInfo]]) -> list[Commit]:
        """The listed commits, read concurrently and decoded."""

        async def fetch(seq: int) -> Commit:
            key = log_key(seq)
            data = await self.get(key)
            if data is None:
                raise MemoryStoreError("unavailable", f"{self.location}/{key} vanished while it was read; try again.")
            return await Commit.read(self.location, key, data)

        return await gather_bounded([seq for seq, _ in listed], fetch)


def _owned(listed: Sequence[ObjectInfo]) -> list[tuple[int, ObjectInfo]]:
    """The listed objects that are the store's own (exact keys), with the seqs their keys name."""
    return [(seq, info) for info in listed if (seq := key_seq(info.key)) is not None]


def _applied(state: State, planned: Sequence[Sequence[Change] | MemoryStoreError], seq: int) -> State:
    """A copy of `state` with the changes of every accepted request applied."""
    scratch = state.copy()
    for changes in planned:
        if not isinstance(changes, MemoryStoreError):
            for change in changes:
                scratch.apply_change(change, seq)
    return scratch


def _resolve(
    batch: Sequence[_Request], planned: Sequence[Sequence[Change] | MemoryStoreError], seq: int | None
) -> None:
    for request, outcome in zip(batch, planned, strict=True):
        if request.outcome.done():
            continue
        if isinstance(outcome, MemoryStoreError):
            request.outcome.set_exception(outcome)
        else:
            request.outcome.set_result(seq if outcome else None)


def _fail(batch: Sequence[_Request], error: BaseException) -> None:
    for request in batch:
        if not request.outcome.done():
            request.outcome.set_exception(error)


def _consume(outcome: asyncio.Future[int | None]) -> None:
    if not outcome.cancelled():
        outcome.exception()
