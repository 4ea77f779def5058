"""Operator work on one memory: history, past versions, restore, rollback, recovery, bulk import, stats.

Everything that changes the memory does it as new commits through the store's log, so it is
validated like any write, audited in the history, and itself undoable.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime

from a13n_harness.providers.memory import FileFormat, FileText, MemoryStoreError, Origin

from .files.store import LogFileStore
from .format.changes import Change, Delete, Write
from .format.wire_values import checked_path, stored_size
from .history.chain import History, Problem
from .history.erased_paths import ErasedPaths
from .history.erasure import Erasure, ErasurePlan
from .history.recovery import PastState, Recovery
from .objects.interface import VersionedObjectStore
from .objects.retry import FETCH_CONCURRENCY
from .reports import Changeset, Recovered, Revision, Stats, revisions_of
from .runtime.off_loop import off_loop
from .state.operations import checked_size, file_text
from .state.state import State, texts_of

logger = logging.getLogger(__name__)


class MemoryAdmin:
    """The operator's view of one store: read-only history and the commands that repair or bulk-change it."""

    def __init__(self, store: LogFileStore) -> None:
        self.store = store
        self.history = History(store)
        self.recovery = Recovery(store)
        self.erased = ErasedPaths(store, self.history)

    async def revisions(
        self,
        path: str | None = None,
        *,
        limit: int | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
    ) -> list[Revision]:
        """Changes in the retained log, newest first; only those touching `path` when given (purges
        always), made in [since, until], at most `limit`. Walks back from the head and stops as soon
        as it has them, so N changes cost about N requests."""
        wanted = checked_path(path, self.store.format) if path is not None else None
        found: list[Revision] = []
        async for commit in self.history.newest_first(first=min(limit or 4, FETCH_CONCURRENCY)):
            if since is not None and commit.moment < since:
                break  # times rise along the log
            if until is not None and commit.moment > until:
                continue
            for change in reversed(commit.changes):
                found.extend(
                    revision
                    for revision in reversed(revisions_of(commit, change))
                    if wanted is None or revision.path in (wanted, "")
                )
            if limit is not None and len(found) >= limit:
                return found[:limit]
        return found

    async def read_at(self, path: str, version: str) -> FileText:
        """The file as it was once commit `version` had landed (`not_found` if it did not exist then)."""
        old = await self.text_at(path, version)
        if old is None:
            raise MemoryStoreError("not_found", f"{path} did not exist at version {version}.")
        return old

    async def text_at(self, path: str, version: str) -> FileText | None:
        """The file as it was once commit `version` had landed, None if it did not exist then;
        `not_found` for a version the retained history does not hold."""
        path = checked_path(path, self.store.format)
        return file_text(await self.history.state_at(version_seq(version)), path)

    async def seq_at(self, moment: datetime) -> int:
        """The last commit of the run of commits made at or before `moment`, from the retained log.

        The run stops at the first commit made later, even where an older writer's clock put a
        commit after it earlier: a rollback to a time keeps nothing made after that time.
        """
        commits = await self.history.commits()
        before = [commit.seq for commit in itertools.takewhile(lambda commit: commit.moment <= moment, commits)]
        if not before:
            floor = f"starts at {commits[0].time}" if commits else "is empty"
            raise MemoryStoreError(
                "not_found", f"The retained history of {self.store.location} {floor}; nothing before {moment}."
            )
        return before[-1]

    async def preview_restore(self, path: str, version: str) -> Changeset:
        """What `restore` would change now, as of the head it was computed at."""
        path = checked_path(path, self.store.format)
        await self.erased.refuse_restoring(path, version_seq(version))
        target = file_text(await self.history.state_at(version_seq(version)), path)
        state = await self.store.state()
        current = state.files.get(path)
        if target is None:
            return Changeset(state.head, (), (path,) if current is not None else ())
        return Changeset(state.head, (path,) if current is None or current.text != target.text else (), ())

    async def restore(self, path: str, version: str, *, origin: Origin, at: int | None = None) -> str | None:
        """Make `path` what it was at `version` with a new commit; its new version (None: deleted,
        as it did not exist then). `not_found` when it existed neither then nor now. With `at` (the
        head a preview showed), `version_mismatch` when the memory changed since."""
        path = checked_path(path, self.store.format)
        await self.erased.refuse_restoring(path, version_seq(version))
        target = file_text(await self.history.state_at(version_seq(version)), path)
        unchanged: list[str] = []

        def plan(state: State) -> Sequence[Change]:
            _unchanged_since(state, at, self.store.location)
            current = state.files.get(path)
            if target is None and current is None:
                raise MemoryStoreError(
                    "not_found",
                    f"{path} did not exist at version {version} and does not exist now: nothing to restore. "
                    f"`bucket-memory log URL {path}` lists its versions.",
                )
            if target is None:
                return (Delete(path=path),)
            if current is not None and current.text == target.text:
                unchanged.append(str(current.version))
                return ()
            state.check_room(path)
            self.store.check_quota(state, stored_size(target.text) - (current.stored if current is not None else 0))
            return (Write(path=path, text=target.text),)

        seq = await self.store.commit(plan, origin)
        if target is None:
            return None
        return str(seq) if seq is not None else unchanged[-1]

    async def rollback(self, seq: int, *, origin: Origin, at: int | None = None) -> int | None:
        """Make the whole memory what it was at commit `seq`, as one new commit (None: nothing differed);
        with `at`, only while the head is still that commit (see `put_files`)."""
        return await self.put_files(await _texts(await self.history.state_at(seq)), replace=True, origin=origin, at=at)

    async def preview_rollback(self, seq: int) -> Changeset:
        """What `rollback(seq)` would change now."""
        return await self.preview_put_files(await _texts(await self.history.state_at(seq)), replace=True)

    async def recover(self, moment: datetime | None, *, origin: Origin) -> Recovered:
        """Bring back every acknowledged commit from the bucket's object versions (see `Recovery.restore`),
        then, given a `moment`, make the memory what it was then, as one new commit.

        Reaches past a deleted prefix, damaged objects, a purge or compaction.
        """
        restoration = await self.recovery.restore()
        await self.erased.erase_again(origin)
        seq = None if moment is None else await self.make_as_of(moment, origin=origin, at=restoration.head)
        return Recovered(restoration, seq, await self.recovery.versioning())

    async def make_as_of(self, moment: datetime, *, origin: Origin, at: int | None = None) -> int | None:
        """Make the memory what its objects' versions say it was at `moment`, as one new commit
        (None: it already was); `at` as for `put_files`. Paths an erasure names are left as they are."""
        past = await self.recovery.state_as_of(moment)
        return await self.put_files(
            await _past_texts(past), replace=True, origin=origin, at=at, keep=past.erased.__contains__
        )

    async def preview_recover_as_of(self, moment: datetime) -> Changeset:
        """What making the memory what it was at `moment` would change now (its objects as they stand)."""
        past = await self.recovery.state_as_of(moment)
        return await self.preview_put_files(await _past_texts(past), replace=True, keep=past.erased.__contains__)

    async def preview_put_files(
        self, files: Mapping[str, str], *, replace: bool, keep: Callable[[str], bool] | None = None
    ) -> Changeset:
        """What `put_files` would change now, as of the head it was computed at."""
        erased = await self.erased.names()
        checked = {path: text for path, text in _checked(files, self.store.format).items() if path not in erased}
        state = await self.store.state()
        await _compared(state, checked)
        written, deleted = _differences(state, checked, replace, _or_erased(keep, erased))
        return Changeset(state.head, tuple(written), tuple(deleted))

    async def put_files(
        self,
        files: Mapping[str, str],
        *,
        replace: bool,
        origin: Origin,
        keep: Callable[[str], bool] | None = None,
        at: int | None = None,
    ) -> int | None:
        """Write `files` (path to text) as one commit; with `replace`, delete every other file too,
        except those `keep` names.

        Only files whose text differs are written; the new seq, or None when nothing differed.
        With `at` (the head a preview showed), `version_mismatch` when the memory changed since,
        so that what was shown is exactly what is done. A path an erasure in the log names is left
        as it is (an old export, a rollback or a restore never writes an erased text back); one an
        erasure made between the reading and the commit names is erased again at once.
        """
        store = self.store
        erased = await self.erased.names()
        checked = {path: text for path, text in _checked(files, store.format).items() if path not in erased}
        keep = _or_erased(keep, erased)

        def measured() -> dict[str, int]:
            return {path: checked_size(text, store.format) for path, text in checked.items()}

        sizes = await off_loop(sum(map(len, checked.values())), measured)
        await _compared(store.cached_state or await store.state(), checked)

        def plan(state: State) -> Sequence[Change]:
            _unchanged_since(state, at, store.location)
            # The log applies the changes to a copy of the state, which checks the path rule.
            written, deleted = _differences(state, checked, replace, keep)
            replaced = [state.files[path].stored for path in [*deleted, *written] if path in state.files]
            store.check_quota(state, sum(sizes[path] for path in written) - sum(replaced))
            return [
                *(Delete(path=path) for path in deleted),
                *(Write(path=path, text=checked[path]) for path in written),
            ]

        seq = await store.commit(plan, origin)
        if seq is not None and (again := sorted(set(checked) & await self.erased.names())):
            for path in again:  # an erasure landed as this was planned: what it erased may be back
                await Erasure(store).erase(path, origin=origin)
        return seq

    async def preview_erase(self, path: str) -> ErasurePlan:
        """What `erase(path)` would rewrite and delete now, changing nothing."""
        return await Erasure(self.store).plan(path)

    async def erase(self, path: str, *, origin: Origin) -> ErasurePlan:
        """Erase every text the file at `path` ever had from the memory's whole past (`erasure.py`)."""
        return await Erasure(self.store).erase(path, origin=origin)

    async def stats(self) -> Stats:
        """Sizes and the shape of the log, for operators."""
        store = self.store
        state = await store.state()
        commits = await store.reader.list_log()
        checkpoints = await store.reader.list_checkpoints()
        now = await store.now()
        return Stats(
            files=len(state.files),
            bytes=state.stored_bytes,
            max_bytes=store.max_bytes,
            head=state.head,
            commits=len(commits),
            history_floor=commits[0][0] if commits else None,
            checkpoints=len(checkpoints),
            checkpoint=checkpoints[-1][0] if checkpoints else None,
            checkpoint_age=now - checkpoints[-1][1].modified if checkpoints else None,
        )

    async def verify(self, progress: Callable[[int, int], None] | None = None) -> list[Problem]:
        """Every problem with the objects under the prefix; empty when the memory is whole. An
        object that holds a text an erasure erased is named as such."""
        problems = await self.history.verify(progress)
        problems += await self._versions_problems()
        return problems + await self.erased.returned()

    async def _versions_problems(self) -> list[Problem]:
        """What the bucket's first versions prove and the live objects do not (`Recovery.survey`);
        nothing where the bucket keeps no versions or the caller may not read them (an agent's role),
        which the log says."""
        unread = "rewritten or deleted commits are found only where the bucket keeps versions an operator can read"
        if not isinstance(self.store.objects, VersionedObjectStore):
            return []
        try:
            if await self.recovery.versioning() in ("enabled", "suspended", "unknown"):
                return await self.recovery.survey()
        except MemoryStoreError as error:
            if error.code != "forbidden":
                raise
        logger.warning("%s: verify read no object versions: %s", self.store.location, unread)
        return []


async def _past_texts(past: PastState) -> dict[str, str]:
    """The files of a past state to write back: not those erased then, nor any an erasure names since."""
    return {path: text for path, text in (await _texts(past.state)).items() if path not in past.erased}


async def _texts(state: State) -> dict[str, str]:
    """The files of a state, but those whose text was erased (an erased file stays erased)."""
    return await texts_of(((path, live) for path, live in state.files.items() if live.erased is None), state.live_bytes)


async def _compared(state: State, files: Mapping[str, str]) -> None:
    """Read, apart from the loop, the texts of `state` that `_differences` compares with `files`
    (a file read from a packed checkpoint is checked and decoded when its text is first read)."""
    await texts_of(((path, state.files[path]) for path in files if path in state.files), state.live_bytes)


def _differences(
    state: State, files: Mapping[str, str], replace: bool, keep: Callable[[str], bool] | None
) -> tuple[list[str], list[str]]:
    """The paths `files` would write (new or different text) and, with `replace`, delete (but those `keep` names)."""
    deleted = (
        [path for path in sorted(state.files) if path not in files and not (keep and keep(path))] if replace else []
    )
    written = [path for path in sorted(files) if path not in state.files or state.files[path].text != files[path]]
    return written, deleted


def version_seq(version: str) -> int:
    """The commit a version names, or `not_found` for text that names none."""
    if not (isinstance(version, str) and version.isascii() and version.isdecimal() and len(version) <= 20):
        raise MemoryStoreError(
            "not_found", f"{str(version)[:40]!r} is not a version of this store (versions are commit numbers)."
        )
    return int(version)


def _unchanged_since(state: State, at: int | None, location: str) -> None:
    """With `at` (the head a preview showed), refuse a plan on any other head: what was shown is
    exactly what is done."""
    if at is not None and state.head != at:
        raise MemoryStoreError(
            "version_mismatch",
            f"{location} changed since the preview (commit {at}, now {state.head}); nothing was "
            "changed. Run the command again to see what it would change now.",
        )


def _checked(files: Mapping[str, str], format: FileFormat) -> dict[str, str]:
    return {checked_path(path, format): text for path, text in files.items()}


def _or_erased(keep: Callable[[str], bool] | None, erased: frozenset[str]) -> Callable[[str], bool]:
    """`keep`, and every path an erasure names: a bulk write leaves those as they are."""
    return lambda path: path in erased or (keep is not None and keep(path))
