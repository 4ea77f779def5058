"""Keeping the head fresh: the cached state of one memory, when it was proven, and catching up.

The invariants cited by number are those of `log`'s module docstring.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping

from a13n_harness.providers.memory import MemoryStoreError

from ..format.codec import Commit, OffChain
from ..format.signed import CorruptObjectError
from ..format.wire_values import log_key, reloads
from ..objects.interface import ObjectInfo
from ..objects.retry import FETCH_CONCURRENCY, gather_bounded
from ..runtime import telemetry
from ..state.state import State, Void
from .options import LogOptions
from .reader import LogReader, gapless
from .runs import RUN_EVERY, RecentCommits, commits_through_runs
from .traffic import Traffic

logger = logging.getLogger(__name__)


def deleted(location: str) -> MemoryStoreError:
    return MemoryStoreError(
        "memory_deleted",
        f"{location} was deleted: its log is gone, but the bucket still holds old versions of its objects. "
        f"Nothing was read or written. Run `bucket-memory recover {location}` to bring it back with every "
        "acknowledged commit, or use another prefix for a new memory.",
    )


class Overtaken(Exception):
    """The log jumps past the cached head: compaction removed the commits right after it."""


class Head:
    """The state at a memory's head as this process last saw it, and the moment it was proven current.

    `confirmed_at` is a moment before which every commit that landed is in the cached state; only
    `prove` (and loading) moves it, and only forward. `loaded()` gives a state recent enough to plan
    on (invariant 2); `probe()` proves it current now with one GET of the next seq, catching up when
    that exists; a gap that compaction left reloads from the newest checkpoint. A corrupt commit
    drops the cached state, half applied as it is. Callers serialize their use (the log's lock).
    """

    def __init__(self, reader: LogReader, options: LogOptions) -> None:
        self.reader = reader
        self.options = options
        self._proven = float("-inf")
        self._state: State | None = None
        self._clock = options.clock
        self.traffic = Traffic()  # how fast others commit, from the commits of theirs applied here
        self.recent = RecentCommits()
        self.run_due: int | None = None  # a commit of ours whose run housekeeping is to write
        self.made: Commit | None = None  # the newest commit of ours that landed
        self.owed = 0  # the newest commit that acknowledged a write of ours, perhaps not applied yet
        self.reload_due = False  # `recover` marked a commit applied here: what was loaded may be a forgery

    @property
    def confirmed_at(self) -> float:
        """Every commit that landed before this moment (local clock) is in the cached state."""
        return self._proven

    def prove(self, at: float) -> None:
        """Note that every commit that landed before `at` is in the cached state.

        A proof never moves the moment back: a state that holds every commit landed before some
        moment holds those before any earlier one, and applying further commits keeps it true.
        """
        self._proven = max(self._proven, at)

    @property
    def cached(self) -> State | None:
        """The state as last loaded, without any request (None before the first load)."""
        return self._state

    @property
    def seq(self) -> int:
        return self._state.head if self._state is not None else 0

    def current(self) -> State:
        assert self._state is not None, "the head is loaded before use"
        return self._state

    def forget(self) -> None:
        self._state, self._proven = None, float("-inf")
        self.recent.clear()

    def advance(self, planned: State, commit: Commit) -> None:
        """Take in `planned`, layered on the cached state by `commit`, ours, which has landed."""
        self.current().absorb(planned)
        self.recent.keep(commit)
        self.made = commit
        if commit.seq % RUN_EVERY == 0 and self.traffic.shared and self.options.fleet_commit:
            self.run_due = commit.seq  # a fleet's readers catch up through it

    def apply(self, commit: Commit, state: State | None = None) -> Void | None:
        """Apply another process's commit to `state` (the cached one by default); `Void` if it is.
        Only a commit applied to the cached state tells of others writing now: one applied to a
        state being loaded is history (counted as traffic, a fresh process's writes on S3 Express
        took the intent path though no one else wrote)."""
        target = state if state is not None else self.current()
        try:
            void = target.apply(commit, self.reader.location)
        except CorruptObjectError:
            if target is self._state:
                self._state = None
            raise
        if target is self._state:
            self.traffic.note(commit.moment.timestamp())
            self.recent.keep(commit)
            self.reload_due = self.reload_due or reloads(commit.origin)
        return void

    def is_old(self, now: float | None = None, *, since: float | None = None) -> bool:
        """Invariant 2: whether the head was confirmed (or `since` was) more than half the grace period ago."""
        confirmed = self.confirmed_at if since is None else since
        return (self._clock() if now is None else now) - confirmed > self.options.grace_period / 2

    async def loaded(self) -> State:
        """The cached state, loaded when there is none (or `recover` asked), caught up when too old to plan on."""
        if self._state is None or self.reload_due:
            await self.cold_start()
        elif self.is_old():
            await self.catch_up()
        return self.current()

    async def probe(self) -> None:
        """Prove the cached head current with one GET of the next seq, catching up when it exists."""
        await self._reloading(self._probe)

    async def catch_up(self) -> None:
        """Apply every commit after the cached head, found by one listing; reload if compaction left a gap."""
        await self._reloading(self._catch_up)

    async def _reloading(self, step: Callable[[], Awaitable[None]]) -> None:
        """`step`; where the next commit does not follow the cached head, a load as a new process
        makes. `recover` replaced the commits this process applied (seed 475: a cold start in the
        step a commit was forged), and the log it put back is what a new process serves; a forged
        next commit, the load refuses as the step did."""
        try:
            await step()
        except OffChain as error:
            if self._state is not None:
                raise
            logger.info("%s: %s; loading the memory again", self.reader.location, error.reason)
            await self.cold_start()

    async def _probe(self) -> None:
        if self.is_old():
            await self.catch_up()
            return
        sent = self._clock()
        seq = self.current().head + 1
        following = None if self.reader.proven_absent(log_key(seq)) else await self.reader.commit(seq)
        if following is None and self.is_old():
            await self.catch_up()  # answered (after retries) too late to prove anything: invariant 2
            return
        if following is None:
            self.prove(sent)
            return
        self.apply(following)
        await self.catch_up()

    async def _catch_up(self) -> None:
        state = self.current()
        sent = self._clock()
        if not self.reader.objects.ordered_listing and not self.is_old(sent):
            if await self._probe_forward(state, since=self.confirmed_at):
                if self.reload_due:
                    await self.cold_start()
                return
            sent = self._clock()
        listed, runs = await self.reader.list_log_and_runs(after=state.head)
        await self.follow(listed, runs, sent)

    async def follow(
        self, listed: list[tuple[int, ObjectInfo]], runs: list[int], sent: float, *, read: Mapping[int, Commit] = {}
    ) -> None:
        """Apply the commits a listing sent at `sent` found after the cached head (the listing began
        after it: the head moves only under the log's lock); reload if compaction left a gap. The
        commits in `read` (commits of the log the caller read already) are not read again."""
        state = self.current()
        if listed and listed[0][0] != state.head + 1 and not await self.reader.strays_past(state.head):
            logger.info(
                "%s: commits after %d were compacted; reloading from a checkpoint", self.reader.location, state.head
            )
            await self.cold_start()
            return
        seqs = [seq for seq, _ in gapless(listed, state.head)]
        for commit in await commits_through_runs(self.reader, state, seqs, runs, read=read):
            self.apply(commit)  # each checked to follow the one before in the hash chain
        self.prove(sent)
        if self.reload_due:
            await self.cold_start()

    async def confirm_before_create(self, seq: int) -> Commit | None:
        """Invariant 2, before each attempt to create commit `seq`: a head too old to trust is
        re-confirmed by listing from `seq`. The commit found at `seq`, if any (the listing proves
        nothing then: the caller reads on); `Overtaken` when the log jumps past `seq`."""
        if not self.is_old():
            return None
        sent = self._clock()
        listed = await self.reader.list_log(after=seq - 1)
        if not listed:
            self.prove(sent)
            return None
        if listed[0][0] != seq and await self.reader.strays_past(seq - 1):
            self.prove(sent)
            return None
        holder = await self.reader.commit(seq) if listed[0][0] == seq else None
        if holder is None:
            raise Overtaken  # a gap: the keys after the head were compacted (or vanished as we read)
        return holder

    async def _probe_forward(self, state: State, *, since: float) -> bool:
        """Catch up by GETs of the next seqs, a window at a time, until one is absent; whether that
        proved the head (False: list instead). For stores whose listing is unordered and has no
        start-after (S3 Express directory buckets)."""
        while True:
            run, proven = await run_from(self, state.head + 1, FETCH_CONCURRENCY, since=since)
            for commit in run:
                self.apply(commit, state)
            if proven is not None:
                self.prove(proven)
                return True
            if len(run) < FETCH_CONCURRENCY:
                return False

    async def cold_start(self) -> None:
        """Load the newest checkpoint, then the log after it; the state is cached only once whole."""
        reader = self.reader
        self.reload_due = False
        problem = "it kept changing (compaction running?)"
        for _ in range(self.options.request_attempts):
            sent = self._clock()
            checkpoints = await reader.list_checkpoints()
            base = await reader.newest_sound(checkpoints)
            if base is None:
                continue  # compacted between the listing and the read
            state = base.state
            # Keys after the newest checkpoint are never compacted (invariant 4), so a timely 404 is proof.
            if not reader.objects.ordered_listing and await self._probe_forward(state, since=sent):
                self._state = state
                telemetry.count_cold_start()
                return
            listed, runs = await reader.list_log_and_runs(after=state.head)
            if not checkpoints and _unbegun(listed) and await reader.log_existed():
                # The versions seen may be a first commit another writer made since the listing. It
                # would be listed now (nothing that young is compacted, invariant 4): load again.
                if not _unbegun(await reader.list_log()) or await reader.list_checkpoints():
                    continue
                raise deleted(reader.location)
            if base.passed is not None and base.passed_seq not in {seq for seq, _ in gapless(listed, state.head)}:
                raise base.passed  # the log below it was compacted: nothing else holds that state
            if listed and listed[0][0] != state.head + 1 and not await self.reader.strays_past(state.head):
                # Usually a newer checkpoint was written and the log below it compacted meanwhile.
                problem = f"its log jumps from commit {state.head} to {listed[0][0]} with no checkpoint between"
                continue
            listed = gapless(listed, state.head)
            self.recent.clear()
            for commit in await commits_through_runs(self.reader, state, [seq for seq, _ in listed], runs):
                state.apply(commit, reader.location)
                self.recent.keep(commit)
            self._state, self._proven = state, sent
            telemetry.count_cold_start()
            return
        self._state = None
        raise MemoryStoreError(
            "unavailable",
            f"Cannot load {reader.location}: {problem}. Try again; if it persists, run "
            f"`bucket-memory verify {reader.location}`.",
        )


async def run_from(
    head: Head, seq: int, window: int, *, since: float | None = None
) -> tuple[list[Commit], float | None]:
    """The commits at `seq` and after it (after `head`'s), read by GETs of `window` seqs at once, up to the first
    absent one; and the moment that absence proves nothing follows them (None: every key of the
    window was there, or the answer came too late to prove anything).

    A 404 proves a key absent only when answered within half the grace period of `since` (the
    head's confirmation by default), the moment from which no key after it can have been
    compacted (invariant 2): a probe slowed by retries proves nothing.
    """
    sent = head.options.clock()
    seqs = range(seq, seq + window)
    found = await gather_bounded(seqs, lambda number: head.reader.get(log_key(number)))
    run: list[Commit] = []
    for number, data in zip(seqs, found, strict=True):
        if data is None:
            return run, None if head.is_old(since=since) else sent
        run.append(await head.reader.read_commit(log_key(number), data))
    return run, None


def _unbegun(listed: list[tuple[int, ObjectInfo]]) -> bool:
    """Whether a listing of a log with no checkpoint lacks commit 1: a new memory, or a deleted one."""
    return (listed[0][0] if listed else 0) != 1
