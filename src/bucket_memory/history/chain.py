"""Read-only history: the retained log as a checked chain, the state at any retained commit, and verify."""

from __future__ import annotations

import asyncio
import functools
import itertools
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass

from a13n_harness.providers.memory import MemoryStoreError

from ..files.store import LogFileStore
from ..fleet.intents import read_intent
from ..format.codec import Commit
from ..format.signed import CorruptObjectError
from ..format.wire_values import (
    CHECKPOINT_PREFIX,
    LOG_PREFIX,
    PENDING_PREFIX,
    checkpoint_key,
    intent_key_parts,
    key_seq,
    log_key,
    run_seq,
)
from ..log.runs import read_run
from ..objects.retry import FETCH_CONCURRENCY, gather_bounded
from ..runtime.off_loop import off_loop
from ..state.checkpoint_state import read_checkpoint
from ..state.state import State, Void, same_checkpoint, unrecorded_erasure
from .lineage import erasure_problems

# Compaction deletes what verify listed; a check that met it starts again, this many times in all.
_VANISHED = "vanished while it was read"
_VERIFY_ATTEMPTS = 3


@dataclass(frozen=True, slots=True)
class Problem:
    """Something `verify` found wrong with one object."""

    key: str
    message: str


def chain_problems(commits: Sequence[Commit]) -> list[Problem]:
    """Where a run of commits, in seq order, has a gap or breaks the hash chain."""
    problems: list[Problem] = []
    for before, after in itertools.pairwise(commits):
        if after.seq != before.seq + 1:
            problems.append(
                Problem(log_key(after.seq), f"commits {before.seq + 1} to {after.seq - 1} are missing before it")
            )
        elif after.prev != before.hash:
            problems.append(Problem(log_key(after.seq), f"it does not follow commit {before.seq} in the hash chain"))
    return problems


class History:
    """The retained log of one memory, read without changing anything."""

    def __init__(self, store: LogFileStore) -> None:
        self.store = store

    async def commits(self) -> list[Commit]:
        """Every commit still in the log, oldest first, each checked to follow the one before."""
        commits = await self.store.reader.fetch_commits(await self.store.reader.list_log())
        for problem in chain_problems(commits):
            raise CorruptObjectError(self.store.location, problem.key, problem.message)
        return commits

    async def chained_commits(self) -> list[Commit]:
        """The retained log, oldest first, up to the first commit that breaks the chain."""
        commits = await self.store.reader.fetch_commits(await self.store.reader.list_log())
        for index, (before, after) in enumerate(itertools.pairwise(commits)):
            if chain_problems([before, after]):
                return commits[: index + 1]
        return commits

    async def applied(self, commits: list[Commit]) -> list[Commit]:
        """Those of `commits` (a chained run of the retained log) that are not void, found by a replay
        from the checkpoint at or after the one before them; those that checkpoint already holds,
        and all of them where the log keeps no such checkpoint, are taken as applied."""
        if not commits:
            return []
        first = commits[0].seq
        state: State | None = State(format=self.store.format)
        if first > 1:
            bases = [info.key for seq, info in await self.store.reader.list_checkpoints() if seq >= first - 1]
            state = await self.store.reader.load_checkpoint(bases[0]) if bases else None
        if state is None:
            return commits
        applied = [commit for commit in commits if commit.seq <= state.head]
        for commit in commits[len(applied) :]:
            void = await off_loop(commit.size, functools.partial(state.apply, commit, self.store.location))
            if void is None:
                applied.append(commit)
        return applied

    async def newest_first(self, first: int = 4) -> AsyncIterator[Commit]:
        """The retained log from the head back, each commit checked to follow the one it yields next.

        One listing, then GETs a window at a time as the caller reads on (`first` commits, then twice
        as many each time, up to the fetch concurrency): a caller that stops after N commits has
        cost about N requests, however long the log.
        """
        listed = await self.store.reader.list_log()
        newer: Commit | None = None
        end, size = len(listed), max(first, 1)
        while end > 0:
            window, end = listed[max(0, end - size) : end], max(0, end - size)
            size = min(size * 2, FETCH_CONCURRENCY)
            for commit in reversed(await self.store.reader.fetch_commits(window)):
                if newer is not None and (newer.seq != commit.seq + 1 or newer.prev != commit.hash):
                    (problem,) = chain_problems([commit, newer])
                    raise CorruptObjectError(self.store.location, problem.key, problem.message)
                yield commit
                newer = commit

    async def state_at(self, seq: int) -> State:
        """The memory as of commit `seq`: the newest checkpoint at or below it, and the log after it."""
        store = self.store
        for _ in range(store.options.request_attempts):
            checkpoints = [info.key for number, info in await store.reader.list_checkpoints() if number <= seq]
            state = State(format=store.format)
            if checkpoints:
                loaded = await store.reader.load_checkpoint(checkpoints[-1])
                if loaded is None:
                    continue  # compacted meanwhile
                state = loaded
            listed = [(number, info) for number, info in await store.reader.list_log(after=state.head) if number <= seq]
            if state.head + len(listed) != seq or (listed and listed[0][0] != state.head + 1):
                raise await self._not_retained(seq)
            for commit in await store.reader.fetch_commits(listed):
                state.apply(commit, store.location)
            return state
        raise MemoryStoreError(
            "unavailable", f"{store.location} kept changing while commit {seq} was rebuilt; try again."
        )

    async def _not_retained(self, seq: int) -> MemoryStoreError:
        """Why commit `seq` cannot be rebuilt: it is not made yet, or it is older than the retained log."""
        store = self.store
        held = [number for number, _ in await store.reader.list_log()]
        newest = max([*held, *(number for number, _ in await store.reader.list_checkpoints())], default=0)
        if seq > newest:
            return MemoryStoreError(
                "not_found",
                f"There is no commit {seq} yet: the newest commit of {store.location} is {newest}. "
                "`bucket-memory log` lists its commits.",
            )
        return MemoryStoreError(
            "not_found",
            f"Commit {seq} is older than the retained history of {store.location}, which holds commits "
            f"{held[0] if held else newest} to {newest} (older ones were compacted). `bucket-memory log` lists them; "
            "where the bucket keeps object versions, `bucket-memory recover --as-of TIME` makes the memory what it "
            "was at an older time, as a new commit.",
        )

    async def verify(self, progress: Callable[[int, int], None] | None = None) -> list[Problem]:
        """Read every object under the memory's folders and report what is not whole, chained and consistent.

        Each commit must decode and follow the one before; each checkpoint must decode, name the
        hash of its commit, and equal the state the log replays to at its seq. Keys the store never
        writes are reported (and never deleted). A live memory keeps compacting, so an object that
        vanishes between the listing and its read is not taken for damage: the whole check starts
        again from a new listing, and only an object that vanishes every time is reported.
        """
        for _ in range(_VERIFY_ATTEMPTS - 1):
            problems = await self._verify_once(progress)
            if not any(problem.message == _VANISHED for problem in problems):
                return problems
        return await self._verify_once(progress)

    async def _verify_once(self, progress: Callable[[int, int], None] | None) -> list[Problem]:
        store = self.store
        listed = [*await store.reader.list_keys(LOG_PREFIX), *await store.reader.list_keys(CHECKPOINT_PREFIX)]
        unknown = [
            Problem(info.key, "not an object the store writes; readers ignore it")
            for info in listed
            if key_seq(info.key) is None and run_seq(info.key) is None
        ]
        problems: list[Problem] = []  # of the commits and checkpoints read: each stops the replay below
        keys = [info.key for info in listed if key_seq(info.key) is not None]
        done = 0

        async def read(key: str) -> Commit | State | Problem:
            nonlocal done
            data = await store.reader.get(key)
            done += 1
            if progress is not None:
                progress(done, len(keys))
            if data is None:
                return Problem(key, _VANISHED)
            try:
                if key.startswith(LOG_PREFIX):
                    return await store.reader.read_commit(key, data)
                return await read_checkpoint(store.location, key, data, store.format)
            except CorruptObjectError as error:
                return Problem(key, error.reason)

        found = await gather_bounded(keys, read)
        problems.extend(item for item in found if isinstance(item, Problem))
        commits = {item.seq: item for item in found if isinstance(item, Commit)}
        checkpoints = {item.head: item for item in found if isinstance(item, State)}
        ordered = [commits[seq] for seq in sorted(commits)]
        problems.extend(chain_problems(ordered))
        last = ordered[-1].seq if ordered else 0
        for seq, checkpoint in checkpoints.items():
            if seq in commits and checkpoint.head_hash != commits[seq].hash:
                problems.append(Problem(checkpoint_key(seq), f"it names another commit {seq} than the log holds"))
            if seq > last:
                problems.append(Problem(checkpoint_key(seq), f"it is beyond the last commit, {last}"))
        # The replay needs a whole chain and checkpoints that name it; keys no reader reads (strays,
        # runs and intents that are not the store's) do not stand in its way, nor hide what it finds.
        copies = await self._copy_problems([info.key for info in listed if run_seq(info.key)], commits)
        replayed: list[Problem] = []
        if not problems and ordered:
            # A replay of the whole retained log: CPU-bound, on states no one else holds.
            replayed = await asyncio.to_thread(self._replay_problems, commits, checkpoints)
            replayed = replayed or await asyncio.to_thread(self._erasure_problems, commits, checkpoints)
        return [*unknown, *problems, *copies, *replayed]

    async def _copy_problems(self, runs: Sequence[str], commits: Mapping[int, Commit]) -> list[Problem]:
        """Runs that are not copies of the log's commits (a reader passes them over, but they are
        not the store's), and pending intents no writer made. Intents past their window are not
        problems: compaction deletes them."""
        reader, location = self.store.reader, self.store.location
        listed = [info.key for info in await reader.list_keys(PENDING_PREFIX)]
        pending = [key for key in listed if intent_key_parts(key) is not None]
        problems = [
            Problem(key, "not an object the store writes; readers ignore it")
            for key in listed
            if intent_key_parts(key) is None
        ]

        async def run_problem(key: str) -> Problem | None:
            if (data := await reader.get(key)) is None:
                return None  # compacted as it was read
            if (run := await read_run(location, run_seq(key) or 0, data)) is None:
                return Problem(key, "not a run of this memory's commits; readers pass it over")
            if any(commit.seq in commits and commit.hash != commits[commit.seq].hash for commit in run.commits):
                return Problem(key, "a run whose commits differ from the log's; readers pass it over")
            return None

        async def intent_problem(key: str) -> Problem | None:
            if (data := await reader.get(key)) is None:
                return None  # settled and deleted as it was read
            try:
                read_intent(location, key, data)
            except CorruptObjectError as error:
                return Problem(key, f"{error.reason}; no writer folds it")
            return None

        found = [*await gather_bounded(runs, run_problem), *await gather_bounded(pending, intent_problem)]
        return [*problems, *(problem for problem in found if problem is not None)]

    def _erasure_problems(self, commits: Mapping[int, Commit], checkpoints: Mapping[int, State]) -> list[Problem]:
        first = min(commits)
        base = checkpoints[min(seq for seq in checkpoints if seq >= first - 1)] if first > 1 else None
        found = erasure_problems(base or State(format=self.store.format), commits)
        return [Problem(log_key(seq), message) for seq, message in found]

    def _replay_problems(self, commits: Mapping[int, Commit], checkpoints: Mapping[int, State]) -> list[Problem]:
        """Replay the retained log and compare the state with every checkpoint it passes."""
        first = min(commits)
        bases = [seq for seq in checkpoints if first - 1 <= seq]
        if first == 1:
            state = State(format=self.store.format)
        elif bases:
            state = checkpoints[min(bases)].copy()
        else:
            return [Problem(log_key(first), "the log starts here but no checkpoint holds the state before it")]
        # Commits the base checkpoint already holds are not replayed; an erasure no record names is
        # void whatever the state, so it is named there too.
        problems = [
            Problem(log_key(seq), _void_message(commit, Void(seq, reason)))
            for seq, commit in sorted(commits.items())
            if seq <= state.head and (reason := unrecorded_erasure(commit)) is not None
        ]
        for seq in range(state.head + 1, max(commits) + 1):
            try:
                void = state.apply(commits[seq], self.store.location)
            except CorruptObjectError as error:
                return [*problems, Problem(error.key, error.reason)]
            if void is not None:
                problems.append(Problem(log_key(seq), _void_message(commits[seq], void)))
            if seq in checkpoints and not same_checkpoint(checkpoints[seq], state):
                problems.append(
                    Problem(
                        checkpoint_key(seq), "its files or settled intents differ from the state the log replays to"
                    )
                )
        return problems


def _void_message(commit: Commit, void: Void) -> str:
    origin = commit.origin.principal_id or commit.origin.run_id or "an unnamed writer"
    return (
        f"it is void: {void.reason}, so no reader applies it and the log goes on past it. No store plans "
        f"such a commit: it names {origin} as its writer; look for a writer outside the store's rules "
        "(an old release, a hand-made upload)"
    )
