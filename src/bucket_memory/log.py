"""The commit log: a memory as an append-only chain of immutable objects created with put-if-absent.

Commit N lives at `log/<N, 20 digits>.json` and exists exactly when it is committed. A writer
validates its change against the state at head H and creates `log/H+1`; success proves H was the
head. Checkpoints (`checkpoints/<N>.json`) hold the whole state as of commit N so that a cold start
reads a bounded number of objects. docs/design.md gives the argument for each rule here.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import itertools
import json
import logging
import random
import secrets
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from a13n_harness.providers.memory import FileFormat, MemoryStoreError, Origin, describe

from .objects import ObjectInfo, ObjectStore, ObjectVersion, TransientError, VersionedObjectStore, retrying

FORMAT = 1
LOG_PREFIX = "log/"
CHECKPOINT_PREFIX = "checkpoints/"
GENESIS_HASH = "0" * 64
_FETCH_CONCURRENCY = 16

logger = logging.getLogger(__name__)


def log_key(seq: int) -> str:
    return f"{LOG_PREFIX}{seq:020d}.json"


def checkpoint_key(seq: int) -> str:
    return f"{CHECKPOINT_PREFIX}{seq:020d}.json"


def key_seq(key: str) -> int | None:
    """The seq a log or checkpoint key names, or None for a key the store did not write."""
    name = key.rpartition("/")[2]
    digits, dot, suffix = name.partition(".")
    if dot and suffix == "json" and len(digits) == 20 and digits.isdigit():
        return int(digits)
    return None


# A change's `origin` is set when a group commit carries changes of several callers: it names the
# caller of that change, where the commit's own origin names the first.


@dataclass(frozen=True, slots=True)
class Write:
    path: str
    text: str
    origin: Origin | None = None


@dataclass(frozen=True, slots=True)
class Delete:
    path: str
    origin: Origin | None = None


@dataclass(frozen=True, slots=True)
class Move:
    source: str
    destination: str
    origin: Origin | None = None


@dataclass(frozen=True, slots=True)
class Purge:
    origin: Origin | None = None


type Change = Write | Delete | Move | Purge


class CorruptObjectError(MemoryStoreError):
    """An object under the memory's prefix is not what the store wrote there; nothing is served past it."""

    def __init__(self, location: str, key: str, reason: str) -> None:
        super().__init__(
            "unavailable",
            f"{location}/{key} is corrupt ({reason}). The memory is not served past it; "
            f"run `bucket-memory verify {location}` and restore the object from bucket versioning.",
        )
        self.key = key
        self.reason = reason


@dataclass(frozen=True, slots=True)
class Commit:
    """One committed step: its seq, a random id (to recognise our own PUT), and the hash chain."""

    seq: int
    id: str
    time: str
    origin: Origin
    prev: str
    changes: tuple[Change, ...]
    hash: str

    @classmethod
    def create(cls, seq: int, prev: str, changes: Sequence[Change], origin: Origin) -> Commit:
        time = datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
        unhashed = cls(seq, secrets.token_hex(16), time, origin, prev, tuple(changes), hash="")
        return replace(unhashed, hash=_digest(unhashed._body()))

    def encode(self) -> bytes:
        return _canonical({**self._body(), "hash": self.hash})

    @classmethod
    def decode(cls, location: str, key: str, data: bytes) -> Commit:
        body = _verified_body(location, key, data, "commit")
        try:
            commit = cls._from_body(body, body.pop("hash"))
        except (KeyError, TypeError, ValueError) as error:
            raise CorruptObjectError(location, key, f"malformed commit: {error!r}") from None
        if key_seq(key) != commit.seq:
            raise CorruptObjectError(location, key, f"it holds commit {commit.seq}, not the one its key names")
        return commit

    @property
    def moment(self) -> datetime:
        """When the commit was made, by the writer's clock."""
        return datetime.fromisoformat(self.time.replace("Z", "+00:00"))

    @property
    def size(self) -> int:
        """Bytes of text this commit carries, which the checkpoint policy counts."""
        return sum(len(change.text.encode()) for change in self.changes if isinstance(change, Write))

    def _body(self) -> dict[str, Any]:
        return {
            "kind": "commit",
            "format": FORMAT,
            "seq": self.seq,
            "id": self.id,
            "time": self.time,
            "origin": _encode_origin(self.origin),
            "prev": self.prev,
            "changes": [_encode_change(change) for change in self.changes],
        }

    @classmethod
    def _from_body(cls, body: Mapping[str, Any], digest: str) -> Commit:
        return cls(
            seq=_int(body["seq"]),
            id=_str(body["id"]),
            time=_str(body["time"]),
            origin=_decode_origin(body["origin"]),
            prev=_str(body["prev"]),
            changes=tuple(_decode_change(change) for change in body["changes"]),
            hash=_str(digest),
        )


@dataclass(slots=True)
class LiveFile:
    text: str
    version: int
    size: int
    description: str | None


@dataclass(slots=True)
class State:
    """A memory as of commit `head`: its files, and what the change feed and policies need.

    `changed` maps every path changed above `floor` (live or deleted) to the seq of its last
    change, kept in seq order so the change feed reads only the tail. A cursor below `floor`
    (a purge, or tombstones dropped by a checkpoint) can only be answered with a full resync.
    """

    format: FileFormat
    head: int = 0
    head_hash: str = GENESIS_HASH
    floor: int = 0
    files: dict[str, LiveFile] = field(default_factory=dict)
    changed: dict[str, int] = field(default_factory=dict)
    directories: dict[str, int] = field(default_factory=dict)
    live_bytes: int = 0
    checkpoint_seq: int = 0
    bytes_since_checkpoint: int = 0

    def apply(self, commit: Commit, location: str) -> None:
        if commit.seq != self.head + 1:
            raise CorruptObjectError(location, log_key(commit.seq), f"commit {self.head + 1} is missing before it")
        if commit.prev != self.head_hash:
            raise CorruptObjectError(
                location, log_key(commit.seq), f"it does not follow commit {self.head} in the hash chain"
            )
        for change in commit.changes:
            if isinstance(change, Move) and change.source not in self.files:
                raise CorruptObjectError(
                    location, log_key(commit.seq), f"it moves {change.source}, which does not exist"
                )
            self.apply_change(change, commit.seq)
        self.head, self.head_hash = commit.seq, commit.hash
        self.bytes_since_checkpoint += commit.size

    def apply_change(self, change: Change, seq: int) -> None:
        """One change, as commit `seq` makes it (a group commit also applies them to a scratch copy)."""
        match change:
            case Write(path, text):
                self._remove(path, None)
                self._add(path, text, seq)
            case Delete(path):
                self._remove(path, seq)
            case Move(source, destination):
                text = self.files[source].text
                self._remove(source, seq)
                self._add(destination, text, seq)
            case Purge():
                self.files.clear()
                self.changed.clear()
                self.directories.clear()
                self.live_bytes = 0
                self.floor = seq

    def copy(self) -> State:
        """A copy to plan on; files are never changed in place, so sharing them is safe."""
        return replace(self, files=dict(self.files), changed=dict(self.changed), directories=dict(self.directories))

    def changes_since(self, since: int) -> tuple[str, ...] | None:
        """Paths changed after `since`, or None when the state cannot tell (a full resync)."""
        if since < self.floor or since > self.head:
            return None
        paths: list[str] = []
        for path, seq in reversed(self.changed.items()):
            if seq <= since:
                break
            paths.append(path)
        return tuple(sorted(paths))

    def is_directory(self, path: str) -> bool:
        return f"{path}/" in self.directories

    def _add(self, path: str, text: str, seq: int) -> None:
        size = len(text.encode())
        self.files[path] = LiveFile(text, seq, size, _description(text, self.format))
        self.live_bytes += size
        self.changed.pop(path, None)
        self.changed[path] = seq
        for directory in parent_directories(path):
            self.directories[directory] = self.directories.get(directory, 0) + 1

    def _remove(self, path: str, seq: int | None) -> None:
        """Drop a live file; `seq` records a deletion in the change feed, None a file about to be rewritten."""
        removed = self.files.pop(path, None)
        if removed is not None:
            self.live_bytes -= removed.size
            for directory in parent_directories(path):
                if self.directories[directory] == 1:
                    del self.directories[directory]
                else:
                    self.directories[directory] -= 1
        if seq is not None:
            self.changed.pop(path, None)
            self.changed[path] = seq

    def checkpoint(self, max_tombstones: int) -> bytes:
        """The whole state as a checkpoint object, dropping the oldest tombstones past `max_tombstones`."""
        deleted = [(path, seq) for path, seq in self.changed.items() if path not in self.files]
        floor = self.floor
        if len(deleted) > max_tombstones:
            dropped = deleted[: len(deleted) - max_tombstones]
            floor = max(floor, dropped[-1][1])
            deleted = deleted[len(dropped) :]
        body: dict[str, Any] = {
            "kind": "checkpoint",
            "format": FORMAT,
            "seq": self.head,
            "head_hash": self.head_hash,
            "floor": floor,
            "time": datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z"),
            "files": [[path, live.text, live.version] for path, live in sorted(self.files.items())],
            "deleted": deleted,
        }
        return _canonical({**body, "hash": _digest(body)})

    @classmethod
    def from_checkpoint(cls, location: str, key: str, data: bytes, fmt: FileFormat) -> State:
        body = _verified_body(location, key, data, "checkpoint")
        try:
            state = cls(
                format=fmt, head=_int(body["seq"]), head_hash=_str(body["head_hash"]), floor=_int(body["floor"])
            )
            changes: list[tuple[int, str]] = []
            for path, text, version in body["files"]:
                state._add(_str(path), _str(text), _int(version))
                changes.append((_int(version), path))
            changes.extend((_int(seq), _str(path)) for path, seq in body["deleted"])
        except (KeyError, TypeError, ValueError) as error:
            raise CorruptObjectError(location, key, f"malformed checkpoint: {error!r}") from None
        if key_seq(key) != state.head:
            raise CorruptObjectError(location, key, f"it holds the state at {state.head}, not the one its key names")
        state.changed = {path: seq for seq, path in sorted(changes)}
        state.checkpoint_seq = state.head
        return state


type Plan = Callable[[State], Sequence[Change]]


@dataclass(slots=True)
class _Request:
    """A caller's mutation waiting to be committed, alone or with others."""

    plan: Plan
    origin: Origin
    outcome: asyncio.Future[int | None]


class _Overtaken(Exception):
    """The key this writer meant to create lies below what compaction has already removed."""


def _unconfirmed(location: str, seq: int) -> MemoryStoreError:
    return MemoryStoreError(
        "write_unconfirmed",
        f"{location} did not confirm a commit near seq {seq}; the write may or may not have happened. "
        "Read the file before trying again.",
    )


@dataclass(frozen=True, slots=True)
class LogOptions:
    """Tuning of one memory's log.

    `max_staleness` lets reads skip the freshness probe for that many seconds (0: every read is
    fresh). A head confirmed longer ago than half of `grace_period` is re-confirmed by listing,
    never by a GET probe, because compaction deletes objects below a checkpoint older than the
    grace period. A checkpoint is written after `checkpoint_min_commits` commits once the bytes
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


@dataclass(frozen=True, slots=True)
class Problem:
    """Something `verify` found wrong with one object."""

    key: str
    message: str


@dataclass(frozen=True, slots=True)
class Compaction:
    """The outcome of a compaction: objects removed, and the checkpoint history now starts at (0: none)."""

    floor: int
    log_deleted: int
    checkpoints_deleted: int


class CommitLog:
    """One memory's log on an object store, with the state at its head cached in memory.

    Reads call `fresh_state()`; mutations call `commit(plan)`, where `plan` validates against the
    state and returns the changes (or none, for a write that changes nothing). A plan that raises
    or returns nothing is only trusted against a state proven to be the head during the call.
    One lock serializes catch-up and commits within the process.
    """

    def __init__(self, objects: ObjectStore, *, format: FileFormat, options: LogOptions | None = None) -> None:
        self.objects = objects
        self.format = format
        self.options = options or LogOptions()
        self._state: State | None = None
        self._confirmed_at = float("-inf")
        self._clock = self.options.clock
        self._lock = asyncio.Lock()
        self._waiting: list[_Request] = []

    async def fresh_state(self) -> State:
        """The state at the head as of some moment during this call (or within `max_staleness`)."""
        called = self._clock()
        async with self._lock:
            state = await self._loaded()
            # A confirmation sent after this call began is as good as our own probe.
            if self._confirmed_at < called and self._clock() - self._confirmed_at > self.options.max_staleness:
                await self._probe()
            return state

    async def commit(self, plan: Plan, origin: Origin) -> int | None:
        """Commit what `plan` returns at the head; the new seq, or None when it returned no change.

        Calls that arrive while another commit is under way are made together in the next commit:
        their plans run in arrival order, each against the state the ones before it leave.
        """
        request = _Request(plan, origin, asyncio.get_running_loop().create_future())
        self._waiting.append(request)
        try:
            await self._lock.acquire()
        except asyncio.CancelledError:
            if request in self._waiting:  # not taken into a batch yet: it never happens
                self._waiting.remove(request)
            raise
        try:
            if not request.outcome.done():
                batch, self._waiting = self._waiting, []
                try:
                    await self._commit_batch(batch)
                except Exception as error:
                    for waiting in batch:
                        if not waiting.outcome.done():
                            waiting.outcome.set_exception(error)
                except BaseException:
                    # The leader was cancelled or is going down: the shared commit may or may not land.
                    for waiting in batch:
                        if not waiting.outcome.done() and waiting is not request:
                            waiting.outcome.set_exception(_unconfirmed(self.objects.location, self._current().head + 1))
                    raise
        finally:
            self._lock.release()
        return request.outcome.result()

    async def _commit_batch(self, batch: Sequence[_Request]) -> None:
        await self._loaded()
        proven = False
        for attempt in range(self.options.commit_attempts):
            # Plan on a head recent enough to trust: an older one is re-confirmed by listing first.
            await self._ensure_recent()
            state = self._current()
            seq = state.head + 1
            scratch = state if len(batch) == 1 else state.copy()
            planned: list[Sequence[Change] | MemoryStoreError] = []
            for request in batch:
                try:
                    changes = request.plan(scratch)
                except MemoryStoreError as error:
                    planned.append(error)
                    continue
                if len(batch) > 1:
                    for change in changes:
                        scratch.apply_change(change, seq)
                planned.append(changes)
            accepted = [
                (request, changes)
                for request, changes in zip(batch, planned, strict=True)
                if changes and not isinstance(changes, MemoryStoreError)
            ]
            if not accepted:
                # A refusal, or nothing to change, is only trusted against a head proven current.
                if not proven:
                    await self._probe()
                    proven = True
                    continue
            else:
                first = accepted[0][0].origin
                changes = [
                    change if request.origin == first else replace(change, origin=request.origin)
                    for request, request_changes in accepted
                    for change in request_changes
                ]
                commit = Commit.create(seq, state.head_hash, changes, first)
                started = time.monotonic()  # real time, even where tests move the log's clock by hand
                if not await self._create(commit):
                    proven = True  # _create caught up with a listing sent after our attempt lost.
                    # Each round has one winner. Losers wait a random part of one round (two after the
                    # first loss) so that the next round has fewer contenders; longer waits lost more
                    # throughput than they saved PUTs in benchmarks/ (16 writers: 30 commits/s, 14 with 16 rounds).
                    round_trip = max(time.monotonic() - started, 0.001)
                    await asyncio.sleep(random.uniform(0, round_trip * (2 if attempt else 1)))
                    continue
                self._current().apply(commit, self.objects.location)
                await self._maybe_checkpoint(force=any(isinstance(change, Purge) for change in changes))
            for request, outcome in zip(batch, planned, strict=True):
                if isinstance(outcome, MemoryStoreError):
                    request.outcome.set_exception(outcome)
                else:
                    request.outcome.set_result(seq if outcome else None)
            return
        raise MemoryStoreError(
            "unavailable",
            f"{self.options.commit_attempts} commits in a row lost to other writers of {self.objects.location}; "
            "try again.",
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

    def _head_is_old(self, now: float | None = None) -> bool:
        """Whether the cached head was confirmed more than half the grace period ago: then only a
        listing, never a GET probe, may confirm it (compaction may have deleted the next keys)."""
        return (self._clock() if now is None else now) - self._confirmed_at > self.options.grace_period / 2

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
        data = await self._get(log_key(state.head + 1))
        if data is None:
            self._confirmed_at = sent
            return
        state.apply(Commit.decode(self.objects.location, log_key(state.head + 1), data), self.objects.location)
        await self._catch_up()

    async def _catch_up(self) -> None:
        """Apply every commit after the cached head, found by one listing; reload if compaction left a gap."""
        state = self._current()
        sent = self._clock()
        if not self.objects.ordered_listing and not self._head_is_old(sent):
            await self._probe_forward(state, sent)
            return
        listed = await self._list(LOG_PREFIX, start_after=log_key(state.head))
        if listed and key_seq(listed[0].key) != state.head + 1:
            logger.info(
                "%s: commits after %d were compacted; reloading from a checkpoint", self.objects.location, state.head
            )
            await self._cold_start()
            return
        await self._apply_listed(state, listed)
        self._confirmed_at = sent

    async def _probe_forward(self, state: State, sent: float) -> None:
        """Catch up by GETs of the next seqs, a window at a time, until one is absent.

        For stores whose listing is unordered and has no start-after (S3 Express directory
        buckets). A 404 is proof only for a recently confirmed head, which the caller checked.
        """
        location = self.objects.location
        while True:
            window = range(state.head + 1, state.head + 1 + _FETCH_CONCURRENCY)
            found = await asyncio.gather(*(self._get(log_key(seq)) for seq in window))
            for seq, data in zip(window, found, strict=True):
                if data is None:
                    self._confirmed_at = sent
                    return
                state.apply(Commit.decode(location, log_key(seq), data), location)
            sent = self._clock()

    async def _cold_start(self) -> None:
        """Load the newest checkpoint, then the log after it."""
        problem = "it kept changing (compaction running?)"
        for _ in range(self.options.request_attempts):
            sent = self._clock()
            checkpoints = [info for info in await self._list(CHECKPOINT_PREFIX) if key_seq(info.key) is not None]
            state = State(format=self.format)
            if checkpoints:
                key = checkpoints[-1].key
                data = await self._get(key)
                if data is None:
                    continue  # compacted between the listing and the read
                state = State.from_checkpoint(self.objects.location, key, data, self.format)
            if not self.objects.ordered_listing:
                # Keys after the newest checkpoint are never compacted, so a 404 here is proof.
                await self._probe_forward(state, sent)
                self._state = state
                return
            listed = await self._list(LOG_PREFIX, start_after=log_key(state.head) if state.head else None)
            if listed and key_seq(listed[0].key) != state.head + 1:
                # Usually a newer checkpoint was written and the log below it compacted meanwhile.
                problem = f"its log jumps from commit {state.head} to {listed[0].key} with no checkpoint between"
                continue
            await self._apply_listed(state, listed)
            self._state, self._confirmed_at = state, sent
            return
        raise MemoryStoreError(
            "unavailable",
            f"Cannot load {self.objects.location}: {problem}. Try again; if it persists, run "
            f"`bucket-memory verify {self.objects.location}`.",
        )

    async def _apply_listed(self, state: State, listed: Sequence[ObjectInfo]) -> None:
        for commit in await self._fetch(listed):
            state.apply(commit, self.objects.location)

    async def _fetch(self, listed: Sequence[ObjectInfo]) -> list[Commit]:
        """The listed commits, read concurrently and decoded; a key the store never writes is refused."""
        location = self.objects.location
        for info in listed:
            if key_seq(info.key) is None:
                raise CorruptObjectError(location, info.key, "a key the store never writes under log/")
        semaphore = asyncio.Semaphore(_FETCH_CONCURRENCY)

        async def fetch(key: str) -> Commit:
            async with semaphore:
                data = await self._get(key)
            if data is None:
                raise MemoryStoreError("unavailable", f"{location}/{key} vanished while it was read; try again.")
            return Commit.decode(location, key, data)

        return list(await asyncio.gather(*(fetch(info.key) for info in listed)))

    async def history(self) -> list[Commit]:
        """Every commit still in the log, oldest first, each checked to follow the one before."""
        commits = await self._fetch(await self._list(LOG_PREFIX))
        for before, after in itertools.pairwise(commits):
            if after.seq != before.seq + 1:
                raise CorruptObjectError(
                    self.objects.location,
                    log_key(after.seq),
                    f"commits {before.seq + 1} to {after.seq - 1} are missing",
                )
            if after.prev != before.hash:
                raise CorruptObjectError(
                    self.objects.location,
                    log_key(after.seq),
                    f"it does not follow commit {before.seq} in the hash chain",
                )
        return commits

    async def state_at(self, seq: int) -> State:
        """The memory as of commit `seq`: the newest checkpoint at or below it, and the log after it."""
        location = self.objects.location
        for _ in range(self.options.request_attempts):
            checkpoints = [
                info.key for info in await self._list(CHECKPOINT_PREFIX) if (key_seq(info.key) or seq + 1) <= seq
            ]
            state = State(format=self.format)
            if checkpoints:
                data = await self._get(checkpoints[-1])
                if data is None:
                    continue  # compacted meanwhile
                state = State.from_checkpoint(location, checkpoints[-1], data, self.format)
            listed = [
                info
                for info in await self._list(LOG_PREFIX, start_after=log_key(state.head) if state.head else None)
                if (key_seq(info.key) or 0) <= seq
            ]
            if state.head + len(listed) != seq or (listed and key_seq(listed[0].key) != state.head + 1):
                first = await self._list(LOG_PREFIX)
                start = key_seq(first[0].key) if first else None
                raise MemoryStoreError(
                    "not_found",
                    f"Commit {seq} is not in the retained history of {location} (the log holds "
                    f"{'nothing' if start is None else f'commits from {start}'}). "
                    "`bucket-memory recover` rebuilds older states from bucket versioning.",
                )
            await self._apply_listed(state, listed)
            return state
        raise MemoryStoreError("unavailable", f"{location} kept changing while commit {seq} was rebuilt; try again.")

    async def state_as_of(self, moment: datetime) -> State:
        """The memory as it was at `moment`, rebuilt from every stored version of its objects.

        Reads the bucket's noncurrent versions too, so it reaches states that compaction, a purge or
        a deleted prefix removed from the live log. Needs a versioned bucket.
        """
        objects = self._versioned()
        location = self.objects.location
        original = await self._original_versions(objects)
        semaphore = asyncio.Semaphore(_FETCH_CONCURRENCY)

        async def fetch(version: ObjectVersion) -> tuple[str, bytes]:
            async with semaphore:
                data = await retrying(
                    functools.partial(objects.get_version, version.key, version.version),
                    what=f"Reading {location}/{version.key}",
                )
            if data is None:
                raise MemoryStoreError("unavailable", f"{location}/{version.key} version {version.version} vanished.")
            return version.key, data

        logs = [version for key, version in original.items() if key.startswith(LOG_PREFIX)]
        commits = {
            commit.seq: commit
            for commit in (Commit.decode(location, key, data) for key, data in await asyncio.gather(*map(fetch, logs)))
            if commit.moment <= moment
        }
        if not commits:
            raise MemoryStoreError("not_found", f"No stored version of {location} holds a commit made by {moment}.")
        target = max(commits)
        bases = sorted(
            (seq for key in original if key.startswith(CHECKPOINT_PREFIX) and (seq := key_seq(key) or 0) <= target),
            reverse=True,
        )
        for base in [*bases, 0]:
            if all(seq in commits for seq in range(base + 1, target + 1)):
                break
        else:
            raise MemoryStoreError("not_found", f"The stored versions of {location} have gaps before commit {target}.")
        state = State(format=self.format)
        if base:
            key, data = await fetch(original[checkpoint_key(base)])
            state = State.from_checkpoint(location, key, data, self.format)
        for seq in range(base + 1, target + 1):
            state.apply(commits[seq], location)
        return state

    async def undelete(self) -> int:
        """When the live log is gone entirely (a deleted prefix), re-create its objects from their versions.

        The log then resumes where it was, so versions are never reused. Returns how many objects
        were re-created; 0 when the log is live.
        """
        async with self._lock:
            if await self._list(LOG_PREFIX):
                return 0
            objects = self._versioned()
            original = await self._original_versions(objects)
            created = 0
            for key, version in sorted(original.items()):
                data = await retrying(
                    functools.partial(objects.get_version, key, version.version), what=f"Reading {key}"
                )
                if data is not None and await retrying(
                    functools.partial(self.objects.create, key, data), what=f"Re-creating {key}"
                ):
                    created += 1
            self._state = None  # the next use loads what was re-created
            return created

    async def _original_versions(self, objects: VersionedObjectStore) -> dict[str, ObjectVersion]:
        """The first stored version of every commit and checkpoint key, deleted or not.

        The first version is the one the store created; a later one could only be a re-creation.
        """
        original: dict[str, ObjectVersion] = {}
        versions = await retrying(functools.partial(objects.list_versions, ""), what=f"Listing {objects.location}")
        for version in sorted(versions, key=lambda version: version.modified):
            if key_seq(version.key) is not None and version.key.startswith((LOG_PREFIX, CHECKPOINT_PREFIX)):
                original.setdefault(version.key, version)
        return original

    def _versioned(self) -> VersionedObjectStore:
        if not isinstance(self.objects, VersionedObjectStore):
            raise MemoryStoreError(
                "unavailable",
                f"{self.objects.location} keeps no object versions to recover from; restore a backup instead.",
            )
        return self.objects

    async def verify(self, progress: Callable[[int, int], None] | None = None) -> list[Problem]:
        """Read every object under the prefix and report what is not whole, chained and consistent.

        Each commit must decode and follow the one before; each checkpoint must decode, name the
        hash of its commit, and equal the state the log replays to at its seq.
        """
        problems: list[Problem] = []
        log = await self._list(LOG_PREFIX)
        checkpoint_infos = await self._list(CHECKPOINT_PREFIX)
        total, done = len(log) + len(checkpoint_infos), 0
        commits: dict[int, Commit] = {}
        checkpoints: dict[int, State] = {}
        for info in [*log, *checkpoint_infos]:
            seq = key_seq(info.key)
            data = await self._get(info.key)
            done += 1
            if progress is not None:
                progress(done, total)
            if seq is None or data is None:
                problems.append(Problem(info.key, "a key the store never writes" if seq is None else "vanished"))
                continue
            try:
                if info.key.startswith(LOG_PREFIX):
                    commits[seq] = Commit.decode(self.objects.location, info.key, data)
                else:
                    checkpoints[seq] = State.from_checkpoint(self.objects.location, info.key, data, self.format)
            except CorruptObjectError as error:
                problems.append(Problem(info.key, error.reason))
        seqs = sorted(commits)
        for before, after in itertools.pairwise(seqs):
            if after != before + 1:
                problems.append(Problem(log_key(after), f"commits {before + 1} to {after - 1} are missing before it"))
            elif commits[after].prev != commits[before].hash:
                problems.append(Problem(log_key(after), f"it does not follow commit {before} in the hash chain"))
        for seq, checkpoint in checkpoints.items():
            if seq in commits and checkpoint.head_hash != commits[seq].hash:
                problems.append(Problem(checkpoint_key(seq), f"it names another commit {seq} than the log holds"))
            if seqs and seq > seqs[-1]:
                problems.append(Problem(checkpoint_key(seq), f"it is beyond the last commit, {seqs[-1]}"))
        if not problems and seqs:
            problems.extend(self._replay_problems(commits, checkpoints))
        return problems

    def _replay_problems(self, commits: Mapping[int, Commit], checkpoints: Mapping[int, State]) -> list[Problem]:
        """Replay the retained log and compare the state with every checkpoint it passes."""
        first = min(commits)
        bases = [seq for seq in checkpoints if first - 1 <= seq]
        if first == 1:
            state = State(format=self.format)
        elif bases:
            state = checkpoints[min(bases)].copy()
        else:
            return [Problem(log_key(first), "the log starts here but no checkpoint holds the state before it")]
        problems: list[Problem] = []
        for seq in range(state.head + 1, max(commits) + 1):
            state.apply(commits[seq], self.objects.location)
            if seq in checkpoints and _files(checkpoints[seq]) != _files(state):
                problems.append(Problem(checkpoint_key(seq), "its files differ from the state the log replays to"))
        return problems

    async def _create(self, commit: Commit) -> bool:
        """Create `log/<seq>` with our commit: True if ours landed, False if another writer's did.

        A failed request leaves the outcome unknown, so the key is read back and the commit id
        compared. When requests keep failing, a fence (an empty commit at the same seq) settles
        it: once the fence lands our commit never can, so reporting failure is truthful.
        """
        doubtful = False
        for attempt in range(self.options.request_attempts):
            try:
                holder, sent = await self._place(commit)
            except _Overtaken:
                return await self._overtaken(doubtful)
            if holder is not None:
                return await self._settle(commit, holder, sent)
            doubtful = True
            await asyncio.sleep(random.uniform(0, 0.05 * 2**attempt))
        fence = Commit.create(commit.seq, commit.prev, (), Origin(run_id="bucket-memory:fence"))
        for attempt in range(self.options.request_attempts):
            try:
                holder, sent = await self._place(fence)
            except _Overtaken:
                return await self._overtaken(doubtful)
            if holder is not None and holder.id == fence.id:
                self._current().apply(fence, self.objects.location)
                self._confirmed_at = sent
                raise MemoryStoreError(
                    "unavailable", f"{self.objects.location} kept failing; nothing was written. Try again later."
                )
            if holder is not None:
                return await self._settle(commit, holder, sent)
            await asyncio.sleep(random.uniform(0, 0.05 * 2**attempt))
        raise _unconfirmed(self.objects.location, commit.seq)

    async def _place(self, commit: Commit) -> tuple[Commit | None, float]:
        """One attempt to create the commit's key: the commit the key then holds (None: still free), and
        when the attempt was sent. A head too old to trust is first re-confirmed by listing."""
        key = log_key(commit.seq)
        if self._head_is_old():
            sent = self._clock()
            listed = await self._list(LOG_PREFIX, start_after=log_key(commit.seq - 1))
            if listed and listed[0].key != key:
                raise _Overtaken
            if listed:
                return await self._holder(key), sent
            self._confirmed_at = sent
        sent = self._clock()
        try:
            if await self.objects.create(key, commit.encode()):
                return commit, sent
        except TransientError:
            data = await self._get(key)
            return (Commit.decode(self.objects.location, key, data) if data is not None else None), sent
        return await self._holder(key), sent

    async def _holder(self, key: str) -> Commit:
        data = await self._get(key)
        if data is None:
            raise _Overtaken  # refused yet absent: deleted under a head older than we knew
        return Commit.decode(self.objects.location, key, data)

    async def _overtaken(self, doubtful: bool) -> bool:
        """Compaction passed our head: reload. If an earlier attempt may have landed, its fate is lost with it."""
        await self._cold_start()
        if doubtful:
            raise _unconfirmed(self.objects.location, self._current().head)
        return False

    async def _settle(self, commit: Commit, holder: Commit, sent: float) -> bool:
        """Ours if the key holds our commit id (a retried PUT may see 412), else apply the winner and catch up."""
        if holder.id == commit.id:
            self._confirmed_at = sent
            return True
        self._current().apply(holder, self.objects.location)
        await self._catch_up()
        return False

    async def _maybe_checkpoint(self, *, force: bool) -> None:
        state = self._current()
        commits = state.head - state.checkpoint_seq
        options = self.options
        due = commits >= options.checkpoint_max_commits or (
            commits >= options.checkpoint_min_commits and state.bytes_since_checkpoint >= state.live_bytes
        )
        if not (force or due):
            return
        try:
            # Create-only: a duplicate from another writer crossing the same threshold is harmless.
            await self.objects.create(checkpoint_key(state.head), state.checkpoint(options.max_tombstones))
        except (TransientError, MemoryStoreError) as error:
            logger.warning("%s: checkpoint at %d not written: %s", self.objects.location, state.head, error)
            return
        state.checkpoint_seq, state.bytes_since_checkpoint = state.head, 0
        if options.auto_compact:
            try:
                await self._compact()
            except MemoryStoreError as error:
                logger.warning("%s: compaction skipped: %s", self.objects.location, error)

    async def compact(self) -> Compaction:
        """Delete log and checkpoint objects below the newest checkpoint that is older than the grace
        period and outside the history retention."""
        async with self._lock:
            await self._loaded()
            await self._probe()
            return await self._compact()

    async def _compact(self) -> Compaction:
        options, head = self.options, self._current().head
        now = await self.objects.now()
        log = [(seq, info) for info in await self._list(LOG_PREFIX) if (seq := key_seq(info.key)) is not None]
        checkpoints = [
            (seq, info) for info in await self._list(CHECKPOINT_PREFIX) if (seq := key_seq(info.key)) is not None
        ]
        retained = head - options.retain_commits + 1
        young = [seq for seq, info in log if now - info.modified < options.retain_seconds]
        if young:
            retained = min(retained, min(young))
        # The anchor is kept, log object included: a stale head listing after itself must meet it
        # and see the gap, never an empty listing it would mistake for being current.
        anchors = [seq for seq, info in checkpoints if seq <= retained and now - info.modified >= options.grace_period]
        if not anchors:
            return Compaction(floor=0, log_deleted=0, checkpoints_deleted=0)
        anchor = max(anchors)
        dead_log = [info.key for seq, info in log if seq < anchor]
        dead_checkpoints = [info.key for seq, info in checkpoints if seq < anchor]
        # Log first: a compaction that dies between the two leaves old checkpoints, which cost nothing.
        for dead in (dead_log, dead_checkpoints):
            if dead:
                await retrying(
                    functools.partial(self.objects.delete, dead),
                    what=f"Compacting {self.objects.location}",
                    attempts=options.request_attempts,
                )
        return Compaction(floor=anchor, log_deleted=len(dead_log), checkpoints_deleted=len(dead_checkpoints))

    async def _get(self, key: str) -> bytes | None:
        return await retrying(
            lambda: self.objects.get(key),
            what=f"Reading {self.objects.location}/{key}",
            attempts=self.options.request_attempts,
        )

    async def _list(self, prefix: str, *, start_after: str | None = None) -> list[ObjectInfo]:
        return await retrying(
            lambda: self.objects.list(prefix, start_after=start_after),
            what=f"Listing {self.objects.location}/{prefix}",
            attempts=self.options.request_attempts,
        )


def _files(state: State) -> dict[str, tuple[str, int]]:
    return {path: (live.text, live.version) for path, live in state.files.items()}


def parent_directories(path: str) -> Iterable[str]:
    """The directories above a path, outermost first, each ending in "/"."""
    parts = path.split("/")[:-1]
    return ("/".join(parts[: index + 1]) + "/" for index in range(len(parts)))


def _description(text: str, fmt: FileFormat) -> str | None:
    try:
        return describe(text, fmt)
    except MemoryStoreError:
        return None  # written under a looser format; listed without a description, as the harness does


def _encode_change(change: Change) -> dict[str, Any]:
    encoded: dict[str, Any]
    match change:
        case Write(path, text):
            encoded = {"op": "write", "path": path, "text": text}
        case Delete(path):
            encoded = {"op": "delete", "path": path}
        case Move(source, destination):
            encoded = {"op": "move", "from": source, "to": destination}
        case Purge():
            encoded = {"op": "purge"}
    if change.origin is not None:
        encoded["origin"] = _encode_origin(change.origin)
    return encoded


def _decode_change(change: Mapping[str, Any]) -> Change:
    origin = _decode_origin(change["origin"]) if "origin" in change else None
    match change["op"]:
        case "write":
            return Write(_str(change["path"]), _str(change["text"]), origin)
        case "delete":
            return Delete(_str(change["path"]), origin)
        case "move":
            return Move(_str(change["from"]), _str(change["to"]), origin)
        case "purge":
            return Purge(origin)
    raise ValueError(f"unknown change {change['op']!r}")


def _encode_origin(origin: Origin) -> dict[str, str | None]:
    return {"run_id": origin.run_id, "principal_id": origin.principal_id, "tool_call_id": origin.tool_call_id}


def _decode_origin(origin: Mapping[str, Any]) -> Origin:
    return Origin(
        run_id=_optional_str(origin["run_id"]),
        principal_id=_optional_str(origin["principal_id"]),
        tool_call_id=_optional_str(origin["tool_call_id"]),
    )


def _canonical(value: object) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def _digest(body: Mapping[str, Any]) -> str:
    return hashlib.sha256(_canonical(body)).hexdigest()


def _verified_body(location: str, key: str, data: bytes, kind: str) -> dict[str, Any]:
    """The parsed object after checking it is whole and of the expected kind and format."""
    try:
        body = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise CorruptObjectError(location, key, "not a JSON document; truncated or overwritten?") from None
    if not isinstance(body, dict) or body.get("kind") != kind:
        raise CorruptObjectError(location, key, f"not a bucket-memory {kind}")
    if body.get("format") != FORMAT:
        raise CorruptObjectError(
            location, key, f"format {body.get('format')!r}; this bucket-memory reads format {FORMAT} (upgrade it?)"
        )
    digest = body.pop("hash", None)
    if digest != _digest(body):
        raise CorruptObjectError(location, key, "its content does not match its hash")
    body["hash"] = digest
    return body


def _int(value: object) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"expected an integer, got {value!r}")
    return value


def _str(value: object) -> str:
    if not isinstance(value, str):
        raise TypeError(f"expected a string, got {value!r}")
    return value


def _optional_str(value: object) -> str | None:
    return None if value is None else _str(value)
