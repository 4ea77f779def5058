"""Recovery from the bucket's object versions: a wiped prefix, damaged objects, states that
compaction or a purge removed.

The memory's history is in the first stored version of each key: the log creates every key once,
so a later version can only be a re-creation after the prefix was wiped or an overwrite (damage).
A re-creation is a commit of a *fork*: a writer whose cached head was older than the wipe found
the next key gone and committed there, or a writer that could not tell the memory existed began
it again at commit 1. `restore` puts the first versions back and re-applies the forks' commits on
top as new commits; `state_as_of` reads the memory at a past moment.
"""

from __future__ import annotations

import functools
import itertools
import logging
from dataclasses import dataclass
from datetime import datetime

from a13n_harness.providers.memory import MemoryStoreError

from ..files.store import LogFileStore
from ..fleet.intents import read_intent
from ..format.changes import Change
from ..format.codec import Commit
from ..format.signed import CorruptObjectError
from ..format.wire_values import (
    CHECKPOINT_PREFIX,
    LOG_PREFIX,
    PENDING_PREFIX,
    intent_key_parts,
    key_seq,
    log_key,
    reload_mark,
    reloads,
    run_key,
    run_seq,
)
from ..log.reader import LogReader
from ..log.runs import read_run
from ..objects.interface import CREATE, AlreadyExists, IfMatch, PreconditionFailed, VersionedObjectStore
from ..objects.retry import retrying
from ..state.state import State
from .chain import Problem
from .forks import Fork, fork_commits
from .lineage import erasures_in
from .reapplying import Reapplying
from .versions import StoredVersions

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Restoration:
    """What `Recovery.restore` did.

    `restored`: keys re-created from their first version (deleted ones). `repaired`: keys that
    held other bytes, put back. `reapplied`: for each commit of a fork made after a wipe, its seq
    there and the seq of the new commit that carries its changes (None: nothing left to change).
    `head`: the memory's head once done.
    """

    restored: tuple[str, ...]
    repaired: tuple[str, ...]
    reapplied: tuple[tuple[int, int | None], ...]
    head: int

    @property
    def changed(self) -> bool:
        return bool(self.restored or self.repaired or self.reapplied)


@dataclass(frozen=True, slots=True)
class PastState:
    """The memory at a past moment (`state`), and the paths the log's erasures name at any time
    (`erased`): an erasure is a fact about all time, so what is written back from a past state
    leaves those paths alone (a stopped erase leaves their texts in old versions)."""

    state: State
    erased: frozenset[str]


# Rounds of restoring while writers with stale heads go on committing off the restored chain.
_RESTORE_ROUNDS = 4
_RECOVER_PUTS_BACK = "the bucket keeps the version the log made, and `bucket-memory recover` puts it back"


@dataclass(frozen=True, slots=True)
class _Plan:
    """What `restore` changes: the keys to hold their first versions (`kept`: the `chain`'s up to
    `head`, and below it those a fork's writer tries next), the live keys off the chain (`stray`,
    to remove), and the fork commits to re-apply."""

    stored: StoredVersions
    head: int
    chain: frozenset[str]
    kept: frozenset[str]
    live: frozenset[str]
    stray: list[str]
    forks: list[Fork]


class Recovery:
    """Reads every stored version of a memory's objects, deleted ones included; needs a versioned bucket.

    `restore` is safe against itself and writers in any process: keys go back create-only or by a
    conditional overwrite, and each fork commit is re-applied by a commit planned on a head whose
    every commit was read for re-application marks, so two runs can never both re-apply one fork.
    """

    def __init__(self, store: LogFileStore) -> None:
        self.store = store

    async def restore(self) -> Restoration:
        """Bring back every acknowledged commit from the bucket's versions, keeping those made since.

        Puts back, create-only and newest first, the first version of every key of the longest
        chain of first versions (so a writer that resumes meanwhile can only extend that chain),
        repairs keys that hold other bytes, and re-applies the commits of forks made after a wipe
        as new commits on top, each marked with the fork commit's id so that it is re-applied once.
        Safe to run again, at once in several processes, and while writers run: a writer whose
        cached head is a fork commit this run put back may commit after it, off the restored chain,
        while the forks are re-applied; the run then meets that commit and restores again.
        """
        self.store.check_writable()
        restored: list[str] = []
        repaired: list[str] = []
        reapplied: list[tuple[int, int | None]] = []
        removed = False
        for round_ in range(1, _RESTORE_ROUNDS + 1):
            try:
                removed = await self._restore_once(restored, repaired, reapplied) or removed
                break
            except CorruptObjectError as error:
                if round_ == _RESTORE_ROUNDS:
                    raise
                logger.warning("%s; restoring again (a writer committed off the restored chain meanwhile)", error)
                self.store.forget()
        # A process may have loaded a checkpoint or applied a commit repaired, removed or replaced
        # (here, or by a run stopped before its mark), and nothing else tells it: a process at the
        # head's seq reads no commit after it (seed 475), and a forged checkpoint names the chain's
        # hash. The mark is a commit after every one, which makes each process that applies it (or
        # finds it off its chain) load again.
        if removed or repaired or any(new is not None for _, new in reapplied):
            await self.store.commit(lambda state: (), reload_mark())
        head = (await self.store.state(proven=True)).head
        return Restoration(tuple(dict.fromkeys(restored)), tuple(dict.fromkeys(repaired)), tuple(reapplied), head)

    async def _restore_once(
        self, restored: list[str], repaired: list[str], reapplied: list[tuple[int, int | None]]
    ) -> bool:
        """One round of `restore`, adding what it did to the lists as it goes; whether a process may
        hold a key off the chain: one it removed (a forged checkpoint, a commit a process may have
        applied), or one gone since the newest reload mark (`_mark_owed`)."""
        objects, location = self._versioned(), self.store.location
        async with self.store.exclusive():
            plan = await self._plan()
            # Before any commit goes back: no reader may meet an erasure without its record.
            restored += await self._put_back_records(plan.stored)
            for key in sorted(plan.kept, key=_newest_first):
                outcome = await self._put_back(plan.stored, key, key in plan.live)
                if outcome == "restored":
                    restored.append(key)
                elif outcome == "repaired":
                    repaired.append(key)
            for key in plan.stray:  # read above, and kept as a version
                await retrying(functools.partial(objects.delete, [key]), what=f"Removing {location}/{key}")
                logger.info("%s: removed %s, which is not of the memory's chain", location, key)
            for key in await _garbage(self.store.reader):  # kept as a version too
                await retrying(functools.partial(objects.delete, [key]), what=f"Removing {location}/{key}")
                logger.info("%s: removed %s, which no reader reads", location, key)
            self.store.forget()
        reapplying = Reapplying(self.store, plan.head, (await plan.stored.first_commits())[log_key(plan.head)].hash)
        for commit, changes in sorted(plan.forks, key=_made):
            reapplied.append((commit.seq, await reapplying.commit(commit, changes)))
        return bool(plan.stray) or await _mark_owed(plan)

    async def survey(self) -> list[Problem]:
        """What `restore` would change, found without changing anything: for `verify` on a bucket
        that keeps versions, which proves what the log alone cannot (an object rewritten or deleted
        since the log created it, a checkpoint its log disproves, commits made off the chain).
        Writers and compaction change the keys between the listings: what one look finds is looked
        for again, and only what both find is reported."""
        found = await self._findings()
        if found:
            again = set(await self._findings())
            found = [problem for problem in found if problem in again]
        return found

    async def disproved_checkpoints(self) -> list[str]:
        """The live checkpoints, on the memory's chain, that hold another state than its log's first
        versions replay to: forgeries, or made on one (a stray past the chain's head is a fork's, whose
        commits the log keeps; one whose first version does not decode is none anyone loaded)."""
        return await _disproved_on_chain(await self._plan())

    async def _findings(self) -> list[Problem]:
        plan = await self._plan()
        reader = self.store.reader
        problems: list[Problem] = []
        for key in sorted(plan.kept):
            first = plan.stored.first(key)
            assert first is not None
            if key not in plan.live:
                if key in plan.chain and await reader.get(key) is None:  # not one created since the listing
                    problems.append(Problem(key, f"it was deleted: {_RECOVER_PUTS_BACK}"))
            elif not first.current and await self._rewritten(plan.stored, key):
                problems.append(Problem(key, f"it was rewritten since it was made: {_RECOVER_PUTS_BACK}"))
        for key in plan.stray:
            what = (
                "a checkpoint the first versions of its log disprove"
                if key.startswith(CHECKPOINT_PREFIX)
                else "a run of commits off the memory's chain"
                if run_seq(key) is not None
                else "a commit off the memory's chain"
            )
            problems.append(Problem(key, f"{what}: `bucket-memory recover` removes it and re-applies what was written"))
        problems += [
            Problem(key, f"the operator's record of an erasure was deleted: {_RECOVER_PUTS_BACK}")
            for key in _deleted_records(plan.stored)
            if await reader.get(key) is None
        ]
        named = {problem.key for problem in problems}
        problems += [
            Problem(log_key(commit.seq), "a commit made off the memory's chain: `bucket-memory recover` re-applies it")
            for commit, _ in plan.forks
            if log_key(commit.seq) not in named
        ]
        return problems

    async def _rewritten(self, stored: StoredVersions, key: str) -> bool:
        """Whether `key` holds other than its first version or an erased form of it (not: gone since
        the listing)."""
        current = await self.store.reader.get(key)
        return current is not None and not await stored.holds_first(key, await stored.read(stored.first(key)), current)

    async def _plan(self) -> _Plan:
        """The chain of first versions, the keys off it, and the fork commits, read once."""
        objects = self._versioned()
        # Live keys first: each is then among the versions listed next, so a commit a writer adds
        # meanwhile is either in the chain found below or not live here, and never removed.
        listed, runs = await self.store.reader.list_log_and_runs()
        live = {info.key for _, info in listed} | {info.key for _, info in await self.store.reader.list_checkpoints()}
        stored = await StoredVersions.listed(objects, self.store.format)
        firsts = await stored.first_commits()
        base, head = await stored.longest_chain(firsts)
        kept = [log_key(seq) for seq in range(max(base, 1), head + 1)]
        kept += [
            key
            for seq, key in stored.keys(CHECKPOINT_PREFIX)
            if base <= seq <= head and (seq == base or await stored.fits(seq))
        ]
        # Every commit of a fork, from all the versions, read before anything is replaced.
        forks = await fork_commits(stored, firsts, base, head)
        chain = frozenset(kept)
        # Below the base, from the oldest fork commit or live key there: a fork's writer must find
        # the chain's commits at its next keys, so that it reloads, and the retained log must chain.
        below = [seq for seq, _ in listed if seq < base] + ([forks[0][0].seq] if forks else [])
        kept += [log_key(seq) for seq in range(min(below, default=base), base) if log_key(seq) in firsts]
        # Live checkpoints below the base are still read (by a reader of the retained log, by
        # `read_at`): each holds its first version where that fits the log, and goes where it does not.
        kept += [
            key for seq, key in stored.keys(CHECKPOINT_PREFIX) if seq < base and key in live and await stored.fits(seq)
        ]
        stray = [
            key
            for key in sorted(live)
            if (seq := key_seq(key) or 0) > head
            or (key.startswith(CHECKPOINT_PREFIX) and seq != base and key not in kept)
        ]
        stray += await _stray_runs(stored, runs, head)
        return _Plan(stored, head, chain, frozenset(kept), frozenset(live), stray, forks)

    async def state_as_of(self, moment: datetime) -> PastState:
        """The memory as it was at `moment`: the newest commit made by then, on a gap-free run from a
        checkpoint; with every path an erasure in the stored versions names, at any time."""
        location = self.store.location
        stored = await StoredVersions.listed(self._versioned(), self.store.format)
        decoded = sorted((await stored.first_commits()).values(), key=lambda commit: commit.seq)
        # The run made by `moment`, stopped at the first commit made later (as `seq_at` does).
        commits = {commit.seq: commit for commit in itertools.takewhile(lambda c: c.moment <= moment, decoded)}
        if not commits:
            raise MemoryStoreError("not_found", f"No stored version of {location} holds a commit made by {moment}.")
        state = await stored.replayed(commits, max(commits))
        if state is None:
            raise MemoryStoreError(
                "not_found", f"The stored versions of {location} have gaps before commit {max(commits)}."
            )
        recorded = {path for record in await stored.erasure_records() for path in record.paths}
        return PastState(state, frozenset(path for _, path in erasures_in(decoded)) | recorded)

    async def versioning(self) -> str:
        """Whether the bucket keeps versions: "enabled", "suspended", "off"; "unknown" where it may not say."""
        objects = self._versioned()
        try:
            return await retrying(objects.versioning, what=f"Reading the versioning of {objects.location}")
        except MemoryStoreError as error:
            if error.code != "forbidden":
                raise
            return "unknown"

    async def _put_back(self, stored: StoredVersions, key: str, live: bool) -> str | None:
        """Make `key` hold its first version: "restored" (it was gone), "repaired" (it held other
        bytes), or None (it already did)."""
        objects = stored.objects
        first = stored.first(key)
        assert first is not None
        data = await stored.read(first)
        for _ in range(self.store.options.request_attempts):
            if not live:
                try:
                    await retrying(functools.partial(objects.put, key, data, CREATE), what=f"Re-creating {key}")
                    return "restored"
                except AlreadyExists:
                    pass  # something came meanwhile (perhaps ours, sent twice): read what
            current = await self.store.reader.get(key)
            if current is not None and await stored.holds_first(key, data, current):
                return None  # its own, or as an erase rewrote it: never put a text back
            live = current is not None
            newest = (await StoredVersions.listed(objects, stored.format, key)).versions.get(key, [])
            if live and newest:
                replace = functools.partial(objects.put, key, data, IfMatch(newest[-1].tag))
                try:
                    await retrying(replace, what=f"Repairing {key}")
                    return "repaired"
                except PreconditionFailed:
                    pass  # another version came meanwhile: read it again
        raise MemoryStoreError("unavailable", f"{self.store.location}/{key} kept changing while it was restored.")

    async def _put_back_records(self, stored: StoredVersions) -> list[str]:
        """Re-create each erasure record that was deleted (a wipe of the prefix) from its first
        version: the commits it makes erasures are void without it. The keys re-created."""
        restored = []
        for key in _deleted_records(stored):
            data = await stored.read(stored.records[key][0])
            try:
                await retrying(functools.partial(stored.objects.put, key, data, CREATE), what=f"Re-creating {key}")
            except AlreadyExists:
                continue  # re-created meanwhile, by another run
            restored.append(key)
        return restored

    def _versioned(self) -> VersionedObjectStore:
        if not isinstance(self.store.objects, VersionedObjectStore):
            raise MemoryStoreError(
                "unavailable",
                f"{self.store.location} keeps no object versions to recover from; restore a backup instead.",
            )
        return self.store.objects


async def _disproved_on_chain(plan: _Plan) -> list[str]:
    return [
        key
        for key in plan.stray
        if key.startswith(CHECKPOINT_PREFIX)
        and (seq := key_seq(key) or 0) <= plan.head
        and await plan.stored.disproved(seq)
    ]


async def _stray_runs(stored: StoredVersions, runs: list[int], head: int) -> list[str]:
    """The live runs that copy commits other than the chain's first versions (a forked writer's):
    readers pass them over, and nothing else removes them."""
    firsts = await stored.first_commits()
    stray: list[str] = []
    for seq in runs:
        # Retried as every request of recovery is: one 503 once ended `recover` with a bare TransientError.
        data = await retrying(functools.partial(stored.objects.get, run_key(seq)), what=f"Reading {run_key(seq)}")
        run = None if data is None else await read_run(stored.location, seq, data)
        if run is not None and (
            seq > head
            or any(
                (first := firsts.get(log_key(commit.seq))) is None or first.hash != commit.hash
                for commit in run.commits
            )
        ):
            stray.append(run_key(seq))
    return stray


async def _garbage(reader: LogReader) -> list[str]:
    """The runs and intents that do not read as one (what verify names "passed over" and "no writer
    folds it"): every reader passes them over, so only recover removes them, as it removes strays."""
    runs = [(seq, run_key(seq)) for seq in (await reader.list_log_and_runs())[1]]
    pending = [info.key for info in await reader.list_keys(PENDING_PREFIX)]
    garbage = []
    for seq, key in runs:
        data = await reader.get(key)
        if data is not None and await read_run(reader.location, seq, data) is None:
            garbage.append(key)
    for key in pending:
        if intent_key_parts(key) is None:
            continue  # not at an intent's key: verify names it, and nothing the store owns is removed
        data = await reader.get(key)
        try:
            if data is not None:
                read_intent(reader.location, key, data)
        except CorruptObjectError:
            garbage.append(key)
    return garbage


async def _mark_owed(plan: _Plan) -> bool:
    """Whether a version off the chain, made since the newest reload mark, is no longer current at a
    key compaction never deletes (from the oldest live checkpoint on): a process may have loaded it,
    and no mark has told it since. A recover stopped between its removal and its mark leaves one
    (seed 2760), as does an agent that deletes its own forged checkpoint; a first version a wipe
    deleted and `restore` put back is the chain's own, and owes nothing. Limits: a version made in
    the mark's own second (listings tell seconds) is taken for older, so that a second recover does
    not mark again; a mark the agent commits after its forgery and before a recover stopped so hides it."""
    stored = plan.stored
    marks = [
        version.modified
        for key, commit in (await stored.first_commits()).items()
        if reloads(commit.origin) and (version := stored.first(key)) is not None
    ]
    since = max(marks, default=float("-inf"))
    floor = min((key_seq(key) or 0 for key in plan.live if key.startswith(CHECKPOINT_PREFIX)), default=0)
    for key, versions in stored.versions.items():
        seq, own = key_seq(key) or 0, stored.first(key)
        for version in versions:
            if version.current or version.modified <= since or seq < floor:
                continue
            if (
                own is None
                or version.version != own.version
                or seq > plan.head
                or (key.startswith(CHECKPOINT_PREFIX) and not await stored.fits(seq))
            ):
                return True
    return False


def _deleted_records(stored: StoredVersions) -> list[str]:
    """The erasure records that no version is current of: deleted since they were made."""
    return sorted(key for key, versions in stored.records.items() if not any(version.current for version in versions))


def _made(fork: tuple[Commit, tuple[Change, ...]]) -> tuple[datetime, int]:
    """Forks' commits in the order they were made, as near as the server's clock tells."""
    return fork[0].moment, fork[0].seq


def _newest_first(key: str) -> tuple[int, int]:
    """Log keys from the newest, then checkpoints: a chain put back from the top down is never extended
    by a writer that finds a hole in it, and a cold start never meets a checkpoint before its log."""
    return (0 if key.startswith(LOG_PREFIX) else 1, -(key_seq(key) or 0))
