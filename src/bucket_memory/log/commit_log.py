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
9. An intent (a write published for another process to commit, `fleet.py`) is settled at most
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

from ..format.changes import Erase, Purge
from ..objects.interface import ObjectStore
from ..runtime import deadline, telemetry
from ..state.operations import Operation
from ..state.state import State
from .batch import BeforeCreate, Plan, Request, Result, consume, fail
from .committer import Committer, unconfirmed
from .head import Head
from .options import LogOptions
from .reader import LogReader

logger = logging.getLogger(__name__)


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
        self.committer = Committer(self.head, self.options)
        self.after_commit: Callable[[bool], Awaitable[None]] | None = None
        self._clock = self.options.clock
        self._housekeeping_due = self._purge_pending = False
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
        """Hold off this process's catch-ups and commits (while recovery re-creates objects, or a
        fold commits others' intents)."""
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
            stale = confirmed_at < called and self._clock() - confirmed_at > self.options.max_staleness
            # A write of ours that another process committed is read back here, whatever the staleness allowed.
            if stale or self.head.seq < self.head.owed:
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
        A batch's requests must all be sent by the earliest deadline among its callers. An
        `operation` whose commit loses a race may be answered `batch.HandedOver`, to go on as an
        intent (`fleet.py`). `before_create` is awaited with each commit that carries the plan's
        changes before that commit is created (an erasure's record is made there).
        """
        self.check_writable()
        self._on_this_loop()
        end = deadline.end_after(self.options.operation_timeout)
        outcome: asyncio.Future[Result] = asyncio.get_running_loop().create_future()
        request = Request(
            plan, origin, outcome, end, telemetry.current(), operation=operation, before_create=before_create
        )
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
                            commit = await self.committer.commit(batch)
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
                    # A purge or an erasure is followed by a checkpoint at once.
                    ends = commit is not None and any(isinstance(change, Purge | Erase) for change in commit.changes)
                    purged = purged or ends
        if committed:
            self._after(purged=purged)

    def folded(self) -> None:
        """Note a commit made outside the queue (a fold of intents, `fleet.py`): housekeeping
        follows it as it follows the queue's."""
        self._after(purged=False)

    def _after(self, *, purged: bool) -> None:
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
        for task in (self._committer, self._housekeeper):
            if task is not None:
                await asyncio.wait([task])
                if not task.cancelled() and (crash := task.exception()) is not None:
                    raise crash
