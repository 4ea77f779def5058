"""The commit log: fresh reads, group commit, housekeeping after it; the protocol's invariants.

Commit N lives at `log/<N>.json` and exists exactly when it is committed. A writer validates its
change against the state at head H and creates `log/H+1` with put-if-absent; success proves H was
the head. The protocol's invariants, cited by number in the code (docs/design.md's Invariants name
each one's keeper and test):

1. A commit is created only at head + 1 of a state that every plan in it ran on.
2. The half-grace rule: a head confirmed more than G/2 ago (G, the grace period) is re-confirmed
   by a LIST, never by a GET, before a read is served and before every create attempt, the fence
   included, because compaction may have deleted the keys after it.
3. The kept anchor: compaction keeps the anchor checkpoint's own log object, so a LIST after a
   stale head meets a key past the gap and never mistakes an empty listing for a current head.
4. Nothing after the newest checkpoint, nor anything younger than G, is ever deleted.
5. A refusal, or a plan that changes nothing, is trusted only against a head proven current
   during the call.
6. Every create is settled by what its key holds (the commit id says whose it is), never by
   what the create answered alone: a reply can be lost, and a transport can send one create twice.
   When reading keeps failing, an empty fence commit at the same seq settles it; when even that
   cannot be settled the caller gets `write_unconfirmed`, never a false "not written". A key found
   holding our commit proves the head only as of our commit's first attempt, whichever attempt
   (the fence's included) found it. Settling ends in one typed outcome (`settle`): landed, lost to
   another writer, fenced, passed by compaction, or unknown.
8. Freshness has one writer: `Head.prove(at)` records that the cached state holds every commit
   landed before `at`, and only ever moves that moment forward. Every outcome, probe and listing
   names the moment it proves; a read that began before it is served without a request.
7. Housekeeping (checkpoints, compaction) runs after callers have their outcomes, and its failures
   never reach them.
9. An intent (a write published for another process to commit, `fleet/`) is settled at most
   once, by a commit within `folds.FOLD_WINDOW` commits after its base, planned on the exact state
   before it; its author is told only what a commit proves (applied, unchanged, refused, past its
   window) or, having given up after publishing, `write_unconfirmed`.
10. A run (`runs.py`) is a copy of commits, trusted only as the log's own commit at its seq vouches
   for it and as its commits chain from the head; anything else is passed over, never taken for
   corruption of the log.
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import overload

from a13n_harness.providers.memory import FileFormat, MemoryStoreError, Origin

from ..objects.interface import ObjectStore
from ..runtime import deadline, telemetry
from ..state.operations import Operation
from ..state.state import State
from .batch import Answer, BeforeCreate, Lost, Plan, Request, Result
from .committer import Committer
from .group_commit import GroupCommit
from .head import Head, deleted
from .options import LogOptions
from .reader import LogReader

logger = logging.getLogger(__name__)


class CommitLog:
    """One memory's log on an object store: fresh reads, and mutations made by group commit.

    Reads call `fresh_state()`; mutations call `commit(plan, origin)`, where `plan` validates
    against the state and returns the changes (or none, for a write that changes nothing).
    One lock serializes catch-up and commits within the process; mutations that arrive while a
    commit is under way are made together in the next one, which is planned again after each lost
    race (`try_commit`: answered `Lost` instead). `after_commit` is called, outside
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
        self.committer = Committer(self.head, self.options)
        self.after_commit: Callable[[bool], Awaitable[None]] | None = None
        self._clock = self.options.clock
        self._housekeeping_due = self._purge_pending = False
        # Bound to the event loop that uses the log (see _on_this_loop); the cached head is not.
        self._loop: weakref.ref[asyncio.AbstractEventLoop] | None = None
        self._lock = asyncio.Lock()
        self._queue = GroupCommit(self.committer, self._lock, self._after)
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
        self._queue, self._housekeeper = GroupCommit(self.committer, self._lock, self._after), None

    def check_writable(self) -> None:
        """Refuse, with `forbidden`, a change to a log opened read-only."""
        if self.read_only:
            raise MemoryStoreError(
                "forbidden", f"{self.location} was opened read-only; open it without read_only to change it."
            )

    @asynccontextmanager
    async def exclusive(self) -> AsyncIterator[None]:
        """Hold off this process's catch-ups and commits (while recovery re-creates objects, or a
        fold commits others' intents)."""
        self._on_this_loop()
        async with self._lock:
            yield

    async def begun(self) -> bool:
        """Whether the prefix holds a memory (a commit or a checkpoint), found without loading it (a
        damaged one can still be verified); `memory_deleted` where it held one once and holds none now."""
        if await self.reader.list_log() or await self.reader.list_checkpoints():
            return True
        if await self.reader.log_existed():
            raise deleted(self.location)
        return False

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
            stale = confirmed_at < called and self._clock() - confirmed_at > self.options.max_staleness
            # A write of ours that another process committed is read back here, whatever the staleness allowed.
            if stale or self.head.seq < self.head.owed:
                await self.head.probe()
            return self.head.current()  # a probe may have reloaded the memory into a new state

    async def held_state(self) -> State:
        """The state at the head as last proven (loaded if it never was), with no probe: for a plan
        whose own version checks make its commit right whatever the head's age."""
        self._on_this_loop()
        with deadline.within(self.options.operation_timeout):
            async with self._lock:
                await self.head.loaded()
                return self.head.current()

    async def proven_state(self) -> State:
        """The state at a head proven current now (a probe, whatever `max_staleness` allows)."""
        self._on_this_loop()
        with deadline.within(self.options.operation_timeout):
            async with self._lock:
                await self.head.loaded()
                await self.head.probe()
                return self.head.current()

    @overload
    async def commit(self, plan: Plan, origin: Origin, *, before_create: BeforeCreate | None = None) -> int | None: ...

    @overload
    async def commit(self, plan: Plan, origin: Origin, *, operation: Operation) -> int | str: ...

    async def commit(
        self,
        plan: Plan,
        origin: Origin,
        *,
        operation: Operation | None = None,
        before_create: BeforeCreate | None = None,
    ) -> Result:
        """Commit what `plan` returns at the head; the new seq, or None when it returned no change
        (for an `operation`, whose plan `plan` is: the version a write left its file at).

        Calls that arrive while another commit is under way are made together in the next commit:
        their plans run in arrival order, each against the state the ones before it leave. The
        commit runs in a task of its own, so a caller cancelled meanwhile leaves the others theirs.
        A batch's requests must all be sent by the earliest deadline among its callers; a batch
        that loses its race is planned again. `before_create` is awaited with each commit that
        carries the plan's changes before that commit is created (an erasure's record is made there).
        """
        answer = await self._queued(plan, origin, operation=operation, before_create=before_create)
        assert not isinstance(answer, Lost), "a request that retries is never answered Lost"
        return answer

    async def try_commit(self, operation: Operation, origin: Origin) -> int | str | Lost:
        """Commit `operation` as `commit` does, in the next batch, but answer `Lost` rather than plan
        it again when that batch loses its race (a fleet then goes on through an intent)."""
        answer = await self._queued(operation.plan, origin, operation=operation, retries=False)
        assert answer is not None, "an operation's commit names a version"
        return answer

    async def _queued(
        self,
        plan: Plan,
        origin: Origin,
        *,
        operation: Operation | None = None,
        before_create: BeforeCreate | None = None,
        retries: bool = True,
    ) -> Answer:
        """Queue one request for the next batch and wait for its answer."""
        self.check_writable()
        self._on_this_loop()
        end = deadline.end_after(self.options.operation_timeout)
        outcome: asyncio.Future[Answer] = asyncio.get_running_loop().create_future()
        request = Request(
            plan,
            origin,
            outcome,
            end,
            telemetry.current(),
            operation=operation,
            before_create=before_create,
            retries=retries,
        )
        return await self._queue.submit(request)

    def folded(self) -> None:
        """Note a commit made outside the queue (a fold of intents, `fleet/fleet.py`): housekeeping
        follows it as it follows the queue's."""
        self._after(False)

    def _after(self, purged: bool) -> None:
        """Start housekeeping after commits, apart from the commit path (invariant 7)."""
        if self.after_commit is not None:
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
        for task in (self._queue.task, self._housekeeper):
            if task is not None:
                await asyncio.wait([task])
                if not task.cancelled() and (crash := task.exception()) is not None:
                    raise crash
