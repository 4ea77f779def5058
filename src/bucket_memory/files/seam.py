"""The one door into a memory's commit log for the layers above files/: records/, history/, the
operator's commands. They write and read the memory through it as `LogFileStore` does itself, and
the log, its head, committer and fleet stay behind it (tests/test_layers.py holds them to that)."""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager

from a13n_harness.providers.memory import FileFormat, Origin

from ..fleet.fleet import Fleet
from ..fleet.intents import Intent
from ..format.wire_values import checked_origin, reapplication
from ..log.batch import BeforeCreate, Plan
from ..log.commit_log import CommitLog
from ..log.options import LogOptions
from ..log.reader import LogReader
from ..objects.interface import ObjectStore
from ..state.operations import Operation, check_quota
from ..state.state import State


class LogSeam:
    """What a file store offers the layers built on it: commit a one-file operation (through the
    fleet) or a plan of many files (on the serial log), the state at the head, the stored log read
    as it is, the object store, the log's settings and clock. Every change here is checked as the
    store's own writes are (origin, `read_only`, quota); the commit log itself is never handed out.
    """

    format: FileFormat
    max_bytes: int
    fleet: Fleet
    _log: CommitLog

    def check_quota(self, state: State, growth: int) -> None:
        """`memory_full` when `growth` more bytes would take the memory past this store's quota."""
        check_quota(state, growth, self.max_bytes)

    def unsettled_intents(self) -> list[Intent]:
        """The intents this store published and has not seen settled: writes another writer may still
        fold in, which a command interrupted meanwhile must not call unchanged."""
        return list(self.fleet.unsettled.values())

    async def submit(self, operation: Operation, origin: Origin) -> int | str:
        """Commit one file's `operation` as this store's own writes are, through the fleet when it
        meets other writers: its new version (a seq), or the version a write left unchanged."""
        return await self.fleet.submit(operation, checked_origin(origin))

    async def commit(self, plan: Plan, origin: Origin, *, before_create: BeforeCreate | None = None) -> int | None:
        """Commit what `plan` returns at the head, on the serial log (a plan of many files, which
        no intent carries); the new seq, or None when it returned no change. `before_create` runs
        before each attempt's commit is created (an erasure records itself there first)."""
        return await self._log.commit(plan, checked_origin(origin), before_create=before_create)

    async def reapply(self, plan: Plan, fork: str, *, before_create: BeforeCreate | None) -> int | None:
        """`commit` for recovery's re-application of fork commit `fork` (an id), under the origin
        reserved for it, which `commit` refuses: a writer that could forge it could hide a fork."""
        return await self._log.commit(plan, reapplication(fork), before_create=before_create)

    async def state(self, *, proven: bool = False) -> State:
        """The state at the head as `list` and `read` see it (`proven`: at a head probed now)."""
        return await (self._log.proven_state() if proven else self._log.fresh_state())

    async def held_state(self) -> State:
        """The state at the head as last proven, with no request when it is loaded: for planning
        an operation whose version checks refuse it at a newer head (`CommitLog.held_state`)."""
        return await self._log.held_state()

    @property
    def cached_state(self) -> State | None:
        """The state this store holds now, with no request (None before its first read): for
        sizes and cheap early checks that the commit checks again."""
        return self._log.cached_state

    @property
    def reader(self) -> LogReader:
        """The stored log read as it is, changing nothing: its commits, checkpoints, runs and
        erasure records, for the history, verify and recovery (the reader caches nothing)."""
        return self._log.reader

    @property
    def objects(self) -> ObjectStore:
        """The object store the memory lives on, for the operator's work on its objects themselves
        (permissions, stored versions, rewriting, destroying); writes of the memory go through
        `submit` and `commit`."""
        return self._log.objects

    @property
    def options(self) -> LogOptions:
        """The log's settings (attempts, timeouts, the clock), for work that follows the same bounds."""
        return self._log.options

    async def now(self) -> float:
        """The bucket's clock: seconds since the epoch."""
        return await self._log.objects.now()

    @property
    def read_only(self) -> bool:
        """Whether the store was opened read-only, so that every change is refused (`check_writable`)."""
        return self._log.read_only

    def check_writable(self) -> None:
        """Refuse, with `forbidden`, a change to a store opened read-only, before any request."""
        self._log.check_writable()

    def exclusive(self) -> AbstractAsyncContextManager[None]:
        """Hold off this store's catch-ups and commits while recovery puts objects back under it."""
        return self._log.exclusive()

    def forget(self) -> None:
        """Drop the cached state: the next use loads the memory afresh (after recovery changed its objects)."""
        self._log.forget()
