"""Create, settle, fence: one commit's put-if-absent, and what its key then holds, as a typed outcome.

The invariants cited by number are those of `log`'s module docstring. A create that fails in
flight may have landed, and a transport may send one create twice (aiohttp repeats an idempotent
PUT after a dropped connection, so our own first copy can refuse the second): whatever a create
answered, only reading the key tells whose commit it holds. Each outcome carries the moment it
proves the head at, for the committer to hand to `Head.prove`.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

from a13n_harness.providers.memory import MemoryStoreError, Origin

from ..format.codec import Commit
from ..format.signed import CorruptObjectError
from ..format.tombstone import MemoryDestroyed
from ..format.wire_values import log_key
from ..objects.interface import CREATE, AlreadyExists
from ..objects.retry import backoff, within_deadline
from ..runtime import deadline, telemetry
from ..runtime.deadline import DeadlineExceeded
from ..runtime.off_loop import off_loop
from .head import Head, Overtaken, run_from

FENCE_RUN = "bucket-memory:fence"
# Keys a writer whose create was refused reads at once, from the holder's on.
LOSER_READS = 4


@dataclass(frozen=True, slots=True)
class Landed:
    """Our commit holds its seq. `after` are commits read past it; with them, the head holds every
    commit that landed before `proven_at`."""

    after: tuple[Commit, ...]
    proven_at: float


@dataclass(frozen=True, slots=True)
class Lost:
    """Another writer's commit holds the seq, so ours never will. `run` is theirs and any read after
    it; the last was the head at `proven_at` (None: not proven, catch up)."""

    run: tuple[Commit, ...]
    proven_at: float | None


@dataclass(frozen=True, slots=True)
class Fenced:
    """Our attempts never settled, and our empty fence commit took the seq: ours never can. `run` is
    the fence and any commit read after it, proven the head at `proven_at` (None: catch up)."""

    run: tuple[Commit, ...]
    proven_at: float | None


@dataclass(frozen=True, slots=True)
class Passed:
    """The log jumps past the head planned on (compaction): reload and plan again. No attempt of
    ours can have landed."""


@dataclass(frozen=True, slots=True)
class Unknown:
    """Neither our attempts nor the fence were settled: the commit may or may not have landed.
    `reload`: the head planned on was compacted past, so the cached state must go."""

    reload: bool = False


type Settled = Landed | Lost | Fenced | Passed | Unknown


@dataclass(frozen=True, slots=True)
class _Held:
    """What one attempt found at the key: the commit there and any read after it, and the moment
    the last was proven the head (None: not proven)."""

    run: tuple[Commit, ...]
    proven_at: float | None


class Settler:
    """Creates a commit's key and settles who holds it (invariant 6), retrying with backoff.

    After `attempts` unsettled tries it creates an empty fence commit at the same seq: once a fence
    holds the key, ours never can, so "nothing was written" is true. A key found holding our commit
    proves the head only as of our commit's first attempt (an earlier attempt may have landed and
    others committed after it), whichever attempt, the fence's included, found it. Any error after
    a create may have landed becomes `Unknown`, never a definitive failure.
    """

    def __init__(self, head: Head, attempts: int) -> None:
        self.head = head
        self.attempts = attempts
        self.round_seconds = 0.0  # how long the last create request took: the length of a round

    @property
    def location(self) -> str:
        return self.head.reader.location

    async def settle(self, commit: Commit, *, loser_reads: int = LOSER_READS) -> Settled:
        """Create `commit` at its seq and find out whose commit the key holds (a refused create
        reads `loser_reads` keys from it on at once)."""
        first_sent = self.head.options.clock()
        doubtful = False  # an attempt may have landed without our knowing
        fence: Commit | None = None
        try:
            for candidate in (commit, None):
                # Made only when our attempts never settled.
                candidate = candidate or (fence := self._fence(commit))
                for attempt in range(self.attempts):
                    try:
                        held = await self._attempt(candidate, loser_reads)
                    except Overtaken:
                        return Unknown(reload=True) if doubtful else Passed()
                    if held is None:
                        doubtful = True
                        telemetry.count("retries")
                        await asyncio.sleep(deadline.clip(backoff(attempt)))
                        continue
                    holder, after = held.run[0], held.run[1:]
                    if holder.id == commit.id:
                        proven = first_sent if held.proven_at is None else max(first_sent, held.proven_at)
                        return Landed(after, proven)
                    if fence is not None and holder.id == fence.id:
                        return Fenced(held.run, held.proven_at)
                    return Lost(held.run, held.proven_at)
        except MemoryStoreError as error:
            if doubtful and not isinstance(error, CorruptObjectError | MemoryDestroyed):
                return Unknown()
            raise
        return Unknown()

    def _fence(self, commit: Commit) -> Commit:
        return Commit.create(
            commit.seq,
            commit.prev,
            (),
            Origin(run_id=FENCE_RUN),
            at=commit.moment.timestamp(),
            sealed=commit.sealed,
        )

    async def _attempt(self, commit: Commit, loser_reads: int) -> _Held | None:
        """One attempt to create the commit's key, and what the key then holds (None: unknown).

        A head too old to trust is first re-confirmed by listing (invariant 2). When the create is
        refused, the keys from it on are read in the same round trip: a loser is usually only a few
        commits behind, and one 404 among them proves its new head without a listing.
        """
        key, head = log_key(commit.seq), self.head
        # Before the head is confirmed, so that nothing waits between that and the create.
        encoded = await off_loop(commit.encoded_size, commit.encode)  # an import's commit is megabytes
        if (found := await head.confirm_before_create(commit.seq)) is not None:
            return _Held((found,), None)
        sent = head.options.clock()
        what = f"Committing {self.location}/{key}"
        started = time.monotonic()  # real time, even where tests move the log's clock by hand
        telemetry.count("bytes_written", len(encoded))
        try:
            await within_deadline(lambda: head.reader.objects.put(key, encoded, CREATE), what=what)
            created = True
        except AlreadyExists:  # another writer's commit is there, or our own create, sent twice by the transport
            created = False
        except MemoryStoreError as error:
            if isinstance(error, DeadlineExceeded) or error.code == "forbidden":
                raise  # never sent, or refused before anything was written: it did not land
            # Every backend keeps the rule that any `MemoryStoreError` means nothing was written
            # (`objects/interface.py`); only these two are trusted to say so, since a backend that
            # broke the rule would have an acknowledged write reported as failed: read back.
            return await self._read_back(key, what)
        except Exception:  # TransientError or unmapped: it may have landed, so read the key back
            return await self._read_back(key, what)
        self.round_seconds = time.monotonic() - started
        if created:
            return _Held((commit,), sent)
        try:
            run, proven_at = await run_from(head, commit.seq, loser_reads)
        except (CorruptObjectError, MemoryDestroyed):
            raise
        except MemoryStoreError:
            return None
        if not run:
            raise Overtaken  # refused yet absent: deleted under a head older than we knew
        return _Held(tuple(run), proven_at)

    async def _read_back(self, key: str, what: str) -> _Held | None:
        """After a create whose outcome is unknown: the commit the key holds, or None (absent, or
        unreadable now: still unknown, as a create in flight may land later)."""
        try:
            data = await within_deadline(lambda: self.head.reader.objects.get(key), what=what)
        except Exception:
            return None
        return _Held((await self.head.reader.read_commit(key, data),), None) if data is not None else None
