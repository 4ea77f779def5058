"""Erasure: every text one file ever had, removed from the live state, the retained log, every
checkpoint and every stored version of them, with the history still verifiable.

The order makes it safe while writers run and resumable after a crash at any point:

1. An erasure commit (`Erase` changes naming the file's paths; its origin names the operator)
   deletes the file. Every writer must apply it before it can commit anything after it, so none
   writes the old text back from a cached head; a checkpoint follows at once, so a cold start
   never needs an older one.
2. The current objects holding its texts are rewritten with those texts erased, several at a time
   (commits, then checkpoints: a void commit's rewrite records its verdict before any replay may
   start from an erased checkpoint below it):
   an edit of an erased text leaves it erased, so a replay through any mix of erased and unerased
   objects serves, and a crash part-way leaves a memory that opens. A commit of format 3 keeps
   its hash (it covers a salted digest of each text); an older one keeps its stored hash, which
   can no longer be checked against its content.
3. Checkpoints written meanwhile by writers that were behind are looked for and rewritten too.
4. Every other stored version holding a text of the file is deleted: the old versions of the
   rewritten objects, and versions of compacted or overwritten keys, found by the file's names.

Running it again finds the erasure commit and does whatever is left.
"""

from __future__ import annotations

import functools
import logging
from dataclasses import dataclass

from a13n_harness.providers.memory import MemoryStoreError, Origin

from ..files.store import LogFileStore
from ..format.changes import Change, Erase, Write
from ..format.decoded import DECODED
from ..format.wire_values import LOG_PREFIX, checked_origin, checked_path, key_seq, log_key, run_seq
from ..log.erasure_records import RecordedAttempts
from ..objects.interface import ObjectVersion
from ..objects.retry import gather_bounded, retrying
from ..state.state import State
from .chain import History, Problem, chain_problems
from .earlier_erasures import record_earlier_erasures
from .erased_file import ErasedFile, candidates, holding_now
from .holding import an_intent, holds_any, holds_names
from .lineage import Lineages
from .rewriting import Rewriting

logger = logging.getLogger(__name__)

# Checkpoints a writer that was behind may still write below the erasure: looked for this many times.
_SWEEPS = 3


@dataclass(frozen=True, slots=True)
class ErasurePlan:
    """What erasing `path` does: the names the file ever had (`paths`), the erasure commit
    (`erasure`; None when it is still to be made), the current objects whose texts are rewritten
    (`rewrites`), and the stored versions deleted (`versions`, "key@version"; a local memory's staging files
    that writers which died mid-create left, ".staging/name")."""

    path: str
    paths: tuple[str, ...]
    erasure: int | None
    rewrites: tuple[str, ...]
    versions: tuple[str, ...]


class Erasure:
    """Erases one file's texts from a memory's whole past (see the module's docstring for the steps).

    It needs the operator's permissions on a bucket: listing, reading and deleting object versions
    (`bucket-memory policy --operator`); a local memory keeps no versions and is rewritten in place."""

    def __init__(self, store: LogFileStore) -> None:
        self.store = store
        self.rewriting = Rewriting(store)

    async def plan(self, path: str) -> ErasurePlan:
        """What `erase(path)` would rewrite and delete now, changing nothing."""
        target = await self._target(checked_path(path, self.store.format))
        erasure = target.lineages.erasure(target.path, target.files)
        rewrites = await holding_now(self.store, target, erasure or target.lineages.head + 1)
        copies = await self._copies(target)
        versions = await self._old_versions(target, erasure)
        self._check_something(target, erasure, rewrites, versions)
        return ErasurePlan(
            target.path,
            tuple(sorted(target.names)),
            erasure,
            tuple(rewrites),
            (*copies, *(f"{version.key}@{version.version}" for version in versions)),
        )

    async def erase(self, path: str, *, origin: Origin, finish_only: bool = False) -> ErasurePlan:
        """Erase every text the file at `path` ever had (under any of its names); what was done.
        `finish_only`: finish an erasure the log holds, never commit one (not_found where none applies)."""
        origin = checked_origin(origin)
        await self.rewriting.check()
        path = checked_path(path, self.store.format)
        if await record_earlier_erasures(self.store, path):
            logger.warning("%s: recorded the erasure of %s that an earlier release made", self.store.location, path)
        target = await self._target(path)
        erasure = target.lineages.erasure(target.path, target.files)
        if erasure is None:
            if finish_only:  # the file at `path` now is another, written since: nobody asked to erase it
                raise MemoryStoreError(
                    "not_found",
                    f"No erasure of the file now at {target.path} in {self.store.location} to finish; "
                    "`bucket-memory erase` erases it.",
                )
            if not target.files:
                self._check_something(target, None, [], await self._old_versions(target, None))
            erasure = await self._commit_erasure(target, origin)
        await self._put_back(target, erasure, origin)
        await self.store.settle()  # the checkpoint that follows an erasure
        # Reads drop the file from here; what the erase rewrites and deletes waits for a log no forgery stands on.
        await self.rewriting.refuse_disproved()
        rewritten: list[str] = []
        looked_at: set[str] = set()
        dropped: list[str] = []
        for _ in range(_SWEEPS):  # then again for checkpoints and runs written meanwhile below the erasure
            found = await candidates(self.store, target, erasure, looked_at)
            copies = await self._copies(target)
            if not found and not copies:
                break
            rewritten.extend(await self.rewriting.rewrite_all(found, first=target.void_commits))  # each read once
            if copies:
                what = f"Deleting copies of {target.path} in {self.store.location}"
                await retrying(functools.partial(self.store.objects.delete, copies), what=what)
                dropped.extend(copies)
        deleted = await self._old_versions(target, erasure)
        await self.rewriting.delete_versions(deleted)
        # A recover in another process may have put back a version it listed before the erasure
        # (and stopped, perhaps, part-way through erasing it again): what holds a text now, current
        # or not, goes too.
        if again := await holding_now(self.store, target, erasure):
            logger.warning("%s: %s held a text of %s again; erased again", self.store.location, again, path)
            again_found = await candidates(self.store, target, erasure, set())
            rewritten.extend(await self.rewriting.rewrite_all(again_found, first=target.void_commits))
        if more := await self._old_versions(target, erasure):
            await self.rewriting.delete_versions(more)
            deleted += more
        staged = await self.rewriting.staged_leftovers(lambda name, data: holds_any(data, target.names))
        DECODED.clear()  # the objects rewritten were decoded, texts and all, for this process's readers
        logger.info(
            "%s: erased %s: commit %d, %d objects rewritten", self.store.location, path, erasure, len(rewritten)
        )
        return ErasurePlan(
            target.path,
            tuple(sorted(target.names)),
            erasure,
            tuple(rewritten),
            (*dropped, *(f"{version.key}@{version.version}" for version in deleted), *staged),
        )

    async def returned(self, path: str) -> tuple[int, list[str]] | None:
        """For a file an erasure erased: that erasure's seq and the current objects that hold one of
        its texts again (a recover, say, put back a version listed before it); None for a file no
        erasure in the retained log erased."""
        target = await self._target(checked_path(path, self.store.format))
        erasure = target.lineages.erasure(target.path, target.files)
        return None if erasure is None else (erasure, await holding_now(self.store, target, erasure))

    async def _target(self, path: str) -> ErasedFile:
        """The file at `path` through the retained log, from the oldest checkpoint it starts from."""
        reader = self.store.reader
        for _ in range(self.store.options.request_attempts):
            commits = await History(self.store).commits()
            base: State | None = State(format=self.store.format)
            if commits and commits[0].seq > 1:
                # The oldest checkpoint the retained log replays from (compaction keeps it and its commit).
                bases = [info.key for seq, info in await reader.list_checkpoints() if seq >= commits[0].seq - 1]
                base = await reader.load_checkpoint(bases[0]) if bases else None
            if base is not None:
                break
        else:
            raise MemoryStoreError(
                "unavailable",
                f"{self.store.location}'s log starts at commit {commits[0].seq}, and no checkpoint holds the state "
                "before it (or each one was compacted as it was read). Run `bucket-memory verify` on it.",
            )
        target = ErasedFile(path, Lineages(base))
        target.feed(commits)
        return target

    async def _commit_erasure(self, target: ErasedFile, origin: Origin) -> int:
        """Commit the erasure, planned on the head or a newer one where the file kept its paths; its seq.

        Writers that keep appending to the file would starve a plan that waited for a head with no
        commit it has not read, so commits since are allowed where they cannot have moved the file
        (see `_erasure_plan`). One case stays unseen: a file deleted and written anew at a path the
        erased file held, between the reading and the commit. The erasure then deleted another file,
        which is put back at once.
        """
        reader = self.store.reader
        # Recorded before each attempt's commit is created, so that no reader can see it unrecorded
        # (and take it for what an agent could forge).
        attempts = RecordedAttempts(reader.erasures)
        for _ in range(self.store.options.commit_attempts):
            head = target.lineages.head
            if await self.rewriting.deleted(log_key(head + 1)):
                # A commit there was deleted by hand: processes that applied it would never apply an
                # erasure made in its place, and would go on serving the text.
                raise MemoryStoreError(
                    "unavailable",
                    f"{self.store.location}/{log_key(head + 1)} held a commit that was deleted, so processes that "
                    f"read it would not see an erasure made there. Run `bucket-memory verify {self.store.location}`, "
                    f"which names it, then `bucket-memory recover {self.store.location}`, then `erase` again.",
                )
            try:
                plan = functools.partial(_erasure_plan, target, head)
                seq = await self.store.commit(plan, origin, before_create=attempts.before_create)
            except MemoryStoreError as error:
                if error.code != "version_mismatch":
                    raise
                await self._read_on(target, head, None)
                continue
            assert seq is not None, "an erasure always changes the log"
            await attempts.landed(seq)
            await self._read_on(target, head, seq)
            if target.lineages.live(target.files):
                continue  # moved away and a file written at its path, unseen: erased again where it went
            return seq
        raise MemoryStoreError(
            "unavailable", f"{self.store.location} kept changing while the erasure was planned; try again."
        )

    async def _read_on(self, target: ErasedFile, head: int, erasure: int | None) -> None:
        """Feed the lineages the commits after `head`. A writer whose cached head holds a commit
        that was deleted since (by hand: no writer deletes the newest commit) commits past the gap
        it left; the file's history then cannot be followed until `recover` repairs the log."""
        commits = await self.store.reader.fetch_commits(await self.store.reader.list_log(after=head))
        problems = chain_problems(commits)
        if commits and commits[0].seq != head + 1:
            problems.insert(
                0, Problem(log_key(commits[0].seq), f"commits {head + 1} to {commits[0].seq - 1} are missing before it")
            )
        if problems:
            done = f"The erasure is commit {erasure}; running `erase` again finishes it. " if erasure else ""
            raise MemoryStoreError(
                "unavailable",
                f"{self.store.location}/{problems[0].key} does not follow the log before it ({problems[0].message}): "
                f"a commit was deleted or changed by hand. {done}Run `bucket-memory verify {self.store.location}`, "
                f"which names it, then `bucket-memory recover {self.store.location}`, then `erase` again.",
            )
        target.feed(commits)

    async def _put_back(self, target: ErasedFile, erasure: int, origin: Origin) -> None:
        """Write back the files erasure commit `erasure` deleted that are not the erased file's, where
        nothing changed their paths since (so also when a run that made the erasure stopped before it
        could, but never over a later delete)."""
        lineages = target.lineages
        others = {
            path
            for path, file in lineages.ended_by(erasure).items()
            if file not in target.files and not lineages.changed_after(path, erasure)
        }
        if not others:
            return
        before = await History(self.store).state_at(erasure - 1)
        texts = {path: before.files[path].text for path in others}

        def plan(state: State) -> tuple[Change, ...]:
            return tuple(Write(path=path, text=text) for path, text in sorted(texts.items()) if path not in state.files)

        if await self.store.commit(plan, origin) is not None:
            logger.warning("%s: the erasure deleted %s, written meanwhile: put back", self.store.location, others)

    async def _copies(self, target: ErasedFile) -> list[str]:
        """The runs and pending intents that spell a name of the file: copies of its texts
        (`runs.py`) and writes not yet committed, which are deleted rather than rewritten (a
        deleted run is read again from the log; a deleted intent's author commits it itself).
        With them, what under `pending/` is no intent: read once, as the fleet deletes it, not
        read again by every erase (seed 597)."""
        reader = self.store.reader
        keys = [info.key for info in await reader.list_keys(LOG_PREFIX) if run_seq(info.key) is not None]
        pending = await reader.list_pending()
        keys += pending

        async def holds(key: str) -> bool:
            data = await reader.get(key)
            return data is not None and (holds_any(data, target.names) or (key in pending and not an_intent(key, data)))

        marks = await gather_bounded(keys, holds)
        return [key for key, mark in zip(keys, marks, strict=True) if mark]

    async def _old_versions(self, target: ErasedFile, erasure: int | None) -> list[ObjectVersion]:
        """Stored versions other than the current ones that hold a text of the file: whose commit or
        checkpoint below the erasure writes a text at one of its names (the old versions of rewritten
        objects among them). Those past it hold another file's texts, written after (seed 303)."""
        below = erasure or target.lineages.head + 1
        return await self.rewriting.old_versions(
            lambda version, data: (key_seq(version.key) or 0) < below and holds_names(data, version.key, target.names)
        )

    def _check_something(
        self, target: ErasedFile, erasure: int | None, rewrites: list[str], versions: list[ObjectVersion]
    ) -> None:
        if not (target.files or erasure or rewrites or versions):
            raise MemoryStoreError(
                "not_found",
                f"No file of {self.store.location} was ever at {target.path}, in the retained history or in the "
                "bucket's versions: nothing to erase. `bucket-memory log URL` lists the paths it holds.",
            )


def _erasure_plan(target: ErasedFile, head: int, state: State) -> tuple[Change, ...]:
    """The erasure's changes: one per name the file had, but names another file holds now (which
    the erasure must not delete), the erased path's first and vouching for the commits of old formats it will erase.
    Planned on `head`, whose every commit the lineages took in, or on a newer head where the file is
    still at every path it was (appends are fine); else `version_mismatch`, and the lineages read on.
    (A plan sees only the paths the batch changed in `state.changed`, so it goes by `state.files`.)"""
    live = target.lineages.live(target.files)
    if state.head != head and any(path not in state.files for path in live):
        raise MemoryStoreError("version_mismatch", "the file moved since its history was read")
    others = {path for path in state.files if path not in live and path != target.path}
    # The erased path first: finishing the erasure (`ErasedPaths.erase_again`) goes by its first
    # path, and another of the file's names may have been another file's too (a move to it).
    paths = sorted(target.names - others, key=lambda path: (path != target.path, path))
    vouches = target.vouches(state.head + 1) or None
    return (Erase(path=paths[0], unchecked=vouches), *(Erase(path=path) for path in paths[1:]))
