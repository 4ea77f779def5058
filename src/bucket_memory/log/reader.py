"""Reading one memory's log objects: retried requests, owned keys only, decoded models."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass

from a13n_harness.providers.memory import FileFormat, MemoryStoreError

from ..format.codec import Commit
from ..format.signed import CorruptObjectError
from ..format.tombstone import DESTROYED, PROOF_KEY, destroyed
from ..format.wire_values import (
    CHECKPOINT_PREFIX,
    LOG_PREFIX,
    PENDING_PREFIX,
    intent_key_parts,
    key_seq,
    log_key,
    run_key,
    run_seq,
)
from ..objects.interface import InstantObjectStore, ObjectInfo, ObjectStore, PastObjectStore
from ..objects.retry import gather_bounded, retrying
from ..runtime import telemetry
from ..state.checkpoint_state import read_checkpoint
from ..state.state import State
from .erasure_records import ErasureRecords

logger = logging.getLogger(__name__)

# Keys a fold's one listing takes at most: a page of S3's and GCS's listings.
TAIL_PAGE = 1000
_PAST_PENDING = PENDING_PREFIX[:-1] + chr(ord("/") + 1)  # the first key past every key under pending/
_BEFORE_OWN = LOG_PREFIX + "0"  # sorts before every key the store writes under log/ and after nothing of theirs


@dataclass(frozen=True, slots=True)
class Tail:
    """What a fold's listing found after a commit: the commits (with their seqs), the seqs of the
    runs beside them, and the keys of the pending intents, each oldest first."""

    commits: list[tuple[int, ObjectInfo]]
    runs: list[int]
    pending: list[str]


class LogReader:
    """The objects under one memory's prefix, read with retries and decoded as hostile input.

    Listings are limited to the store's own folders (`log/`, `checkpoints/`, `pending/`; a fold's
    one listing past them to a page) and name only the keys the store writes, with their seqs;
    anything else under the prefix is ignored here and reported by `verify`. Nothing here caches
    or writes.
    """

    def __init__(self, objects: ObjectStore, *, format: FileFormat, attempts: int) -> None:
        self.objects = objects
        self.format = format
        self.attempts = attempts
        # Decided once: checking a protocol costs more than the stat it would save on every probe.
        self._instant = objects if isinstance(objects, InstantObjectStore) else None
        self.erasures = ErasureRecords(self)
        self._destroyed = False  # the proof of a destroy, once read: a destroy is final

    @property
    def location(self) -> str:
        return self.objects.location

    @property
    def destroyed(self) -> bool:
        """Whether a tombstone with its proof was read here: the memory is destroyed for good."""
        return self._destroyed

    def proven_absent(self, key: str) -> bool:
        """Whether a stat on a local disk proves `key` absent now, with no retry or deadline around
        it (nothing there can wait that a timeout could cut); False elsewhere: ask with `get`."""
        if self._instant is None or not self._instant.absent(key):
            return False
        telemetry.count("requests")
        return True

    async def get(self, key: str) -> bytes | None:
        return await retrying(
            lambda: self.objects.get(key), what=f"Reading {self.location}/{key}", attempts=self.attempts
        )

    async def list_keys(
        self, prefix: str, *, start_after: str | None = None, limit: int | None = None
    ) -> list[ObjectInfo]:
        return await retrying(
            lambda: self.objects.list(prefix, start_after=start_after, limit=limit),
            what=f"Listing {self.location}/{prefix}",
            attempts=self.attempts,
        )

    async def list_log(self, *, after: int = 0) -> list[tuple[int, ObjectInfo]]:
        """The commits in the log after seq `after`, with their seqs."""
        commits, _ = await self.list_log_and_runs(after=after)
        return commits

    async def list_log_and_runs(self, *, after: int = 0) -> tuple[list[tuple[int, ObjectInfo]], list[int]]:
        """The commits in the log after seq `after`, with their seqs, and the seqs of the runs
        beside them (`runs.py`), from one listing of the store's own keys: pages of `TAIL_PAGE` that
        jump past whatever else lies under `log/` (strays; a memory nested there, which a URL
        refuses but an object store opened directly does not), so that costs a page, not its every key."""
        start = log_key(after) if after else _BEFORE_OWN
        if not self.objects.ordered_listing:
            return _commits_and_runs(await self.list_keys(LOG_PREFIX, start_after=start))
        listed: list[ObjectInfo] = []
        while True:
            page = await self.list_keys(LOG_PREFIX, start_after=start, limit=TAIL_PAGE)
            listed += page
            if len(page) < TAIL_PAGE:
                return _commits_and_runs(listed)
            last = page[-1].key
            following = last if key_seq(last) is not None or run_seq(last) is not None else next_own_log_key(last)
            if following is None:
                return _commits_and_runs(listed)
            start = max(last, following[:-1])  # past `last` always: each page lists new keys

    async def list_tail(self, *, after: int) -> Tail:
        """The commits and runs after seq `after` and the pending intents. Where the server lists in
        key order, one listing from `log/<after>` of at most `TAIL_PAGE` keys (`pending/` sorts after
        `log/`), enough when it reaches past `pending/` or ends there, and with a listing of `pending/`
        when it reaches past every key of the log (keys of others between the two folders); else (a
        tail longer than a page, an unordered listing) two listings at once, each limited to its
        folder. Either way no listing takes more than a page of keys not the store's, whatever lies
        under the prefix (another memory nested in it, strays, even under `log/`)."""
        if self.objects.ordered_listing:
            start = log_key(after) if after else LOG_PREFIX
            listed = await self.list_keys("", start_after=start, limit=TAIL_PAGE)
            if len(listed) < TAIL_PAGE or listed[-1].key >= _PAST_PENDING:
                listed = [info for info in listed if info.key > start]
                commits, runs = _commits_and_runs([info for info in listed if info.key.startswith(LOG_PREFIX)])
                return Tail(commits, runs, [info.key for info in listed if intent_key_parts(info.key) is not None])
            if _past_own_log(listed[-1].key):  # the page holds the whole log tail: only pending/ is left
                commits, runs = _commits_and_runs([info for info in listed if info.key.startswith(LOG_PREFIX)])
                return Tail(commits, runs, await self.list_pending())
        (commits, runs), pending = await asyncio.gather(self.list_log_and_runs(after=after), self.list_pending())
        return Tail(commits, runs, pending)

    async def list_checkpoints(self) -> list[tuple[int, ObjectInfo]]:
        """The checkpoints, oldest first, with their seqs."""
        return _owned(await self.list_keys(CHECKPOINT_PREFIX))

    async def list_pending(self) -> list[str]:
        """The keys of the pending intents, oldest first (other keys under `pending/` are ignored)."""
        return [info.key for info in await self.list_keys(PENDING_PREFIX) if intent_key_parts(info.key) is not None]

    async def commit(self, seq: int) -> Commit | None:
        """Commit `seq`, or None when its key is absent."""
        key = log_key(seq)
        data = await self.get(key)
        return None if data is None else await self.read_commit(key, data)

    async def read_commit(self, key: str, data: bytes) -> Commit:
        """The commit in `data`, read from `key` (or from a stored version of it), decoded as hostile
        input and noted as an erasure or not: the one way a commit read from the bucket is made. A
        tombstone is `memory_deleted` where the operator's proof of a destroy is stored (one GET, the
        first time), else a forgery, corrupt (`format/tombstone.py`)."""
        if data == DESTROYED and (self._destroyed or await self.get(PROOF_KEY) == DESTROYED):
            self._destroyed = True
            raise destroyed(self.location)
        return await self.erasures.authorize(await Commit.read(self.location, key, data))

    async def fetch_commits(self, listed: Sequence[tuple[int, ObjectInfo]]) -> list[Commit]:
        """The listed commits, read concurrently and decoded."""
        return await self.commits_at([seq for seq, _ in listed])

    async def commits_at(self, seqs: Sequence[int]) -> list[Commit]:
        """The commits at `seqs` (each known to exist), read concurrently and decoded."""

        async def fetch(seq: int) -> Commit:
            commit = await self.commit(seq)
            if commit is None:
                raise MemoryStoreError(
                    "unavailable", f"{self.location}/{log_key(seq)} vanished while it was read; try again."
                )
            return commit

        return await gather_bounded(seqs, fetch)

    async def log_existed(self) -> bool:
        """Whether the bucket keeps old versions or delete markers of the log: the memory existed once.

        One request. False where the bucket keeps no versions (a local directory, an S3 Express
        directory bucket) or the credentials may not list them (logged: a wiped memory then looks new).
        """
        objects = self.objects
        if not isinstance(objects, PastObjectStore) or not objects.ordered_listing:
            return False
        try:
            return await retrying(
                lambda: objects.has_past(LOG_PREFIX),
                what=f"Listing object versions of {self.location}",
                attempts=self.attempts,
            )
        except MemoryStoreError as error:
            if error.code != "forbidden":
                raise
            logger.warning("%s: cannot tell whether this empty memory was deleted: %s", self.location, error)
            return False

    async def load_checkpoint(self, key: str) -> State | None:
        """The state a checkpoint holds to serve reads from, or None if it is gone."""
        data = await self.get(key)
        return None if data is None else await read_checkpoint(self.location, key, data, self.format, served=True)

    async def newest_sound(self, checkpoints: list[tuple[int, ObjectInfo]]) -> SoundBase | None:
        """The newest checkpoint that decodes, or none (an empty memory), with the newest one passed
        over; None when one vanished as it was read. A damaged or forged checkpoint is passed over by
        every reader alike where the log reaches past it (compaction never anchors on one), so one
        object cannot stop every cold start; `verify` names it and `recover` removes it. Stores
        whose listing is unordered refuse it, as before."""
        passed: CorruptObjectError | None = None
        passed_seq = 0
        for seq, info in reversed(checkpoints):
            try:
                loaded = await self.load_checkpoint(info.key)
            except CorruptObjectError as error:
                if not self.objects.ordered_listing:
                    raise
                logger.warning("%s: passed over %s: %s", self.location, info.key, error.reason)
                if passed is None:
                    passed, passed_seq = error, seq
                continue
            return None if loaded is None else SoundBase(loaded, passed, passed_seq)
        return SoundBase(State(format=self.format), passed, passed_seq)

    async def strays_past(self, head: int) -> bool:
        """Whether keys listed past a gap after `head` are strays (no writer creates a key but the
        next one: a writer outside the rules did, or a deletion left the gap) rather than a log
        compacted past `head`: compaction deletes only below a checkpoint, so one past `head` would
        be listed. Readers stop at the gap alike, writers fill it, `verify` names the strays."""
        if any(seq > head for seq, _ in await self.list_checkpoints()):
            return False
        logger.warning("%s: keys past a gap after commit %d are not read: `verify` names them", self.location, head)
        return True


@dataclass(frozen=True, slots=True)
class SoundBase:
    """What a cold start replays the log from: `state`, and the newest checkpoint it passed over
    as unusable (`passed`, at `passed_seq`), if any."""

    state: State
    passed: CorruptObjectError | None
    passed_seq: int


def _commits_and_runs(listed: Sequence[ObjectInfo]) -> tuple[list[tuple[int, ObjectInfo]], list[int]]:
    """The commits (with their seqs) and the seqs of the runs among keys listed under `log/`."""
    return _owned(listed), [seq for info in listed if (seq := run_seq(info.key)) is not None]


def _owned(listed: Sequence[ObjectInfo]) -> list[tuple[int, ObjectInfo]]:
    """The listed objects that are the store's own (exact keys), with the seqs their keys name."""
    return [(seq, info) for info in listed if (seq := key_seq(info.key)) is not None]


def gapless(listed: list[tuple[int, ObjectInfo]], head: int) -> list[tuple[int, ObjectInfo]]:
    """The listed commits up to the first gap after `head`: no writer creates a key but the next
    one, so keys past a gap are strays (`LogReader.strays_past`), no commits of the log until it reaches them."""
    for index, (seq, _) in enumerate(listed):
        if seq != head + 1 + index:
            return listed[:index]
    return listed


def next_own_log_key(key: str) -> str | None:
    """The first key the store could write under `log/` (a commit's or a run's) that sorts after
    `key`, one it did not write; None when none can. Own keys are `log/` and 20 digits and `.json`
    or `.run.json`, and sort by seq, a commit's key before its run's."""
    name = key[len(LOG_PREFIX) :]
    digits = len(name) - len(name.lstrip("0123456789"))
    if digits >= 20:
        seq = int(name[:20])
        return next((own for own in (log_key(seq), run_key(seq), log_key(seq + 1)) if own > key), None)
    if digits < len(name) and name[digits] > "9":  # past every key that begins with these digits
        if digits == 0 or set(name[:digits]) == {"9"}:
            return None
        return log_key((int(name[:digits]) + 1) * 10 ** (20 - digits))
    return log_key(int(name[:digits] or "0") * 10 ** (20 - digits))  # every key that begins with them follows


def _past_own_log(key: str) -> bool:
    """Whether no key the store writes under `log/` sorts after `key`."""
    if not key.startswith(LOG_PREFIX):
        return key > LOG_PREFIX
    return key_seq(key) is None and run_seq(key) is None and next_own_log_key(key) is None
