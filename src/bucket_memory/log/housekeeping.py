"""Checkpoints and compaction: the work that keeps cold starts short and the bucket small.

Neither is on the commit path: a writer runs them after its callers have their outcomes
(invariant 7 of `log`), and `compact` can also run on a schedule. Failures are logged, never
raised to a writer, because the next writer crossing the threshold simply tries again.
"""

from __future__ import annotations

import contextlib
import functools
import logging
from dataclasses import dataclass

from ..format.changes import text_bytes
from ..format.codec import Checkpoint
from ..format.packed import PackedCheckpoint
from ..format.signed import CorruptObjectError
from ..format.wire_values import checkpoint_key, intent_key_parts, run_key
from ..objects.interface import CREATE, AlreadyExists, ObjectInfo
from ..objects.retry import retrying, within_deadline
from ..runtime import telemetry
from ..runtime.off_loop import off_loop
from ..state.folds import live
from ..state.state import State
from .commit_log import CommitLog
from .runs import Run, packable

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Compaction:
    """The outcome of a compaction: objects removed, and the checkpoint history now starts at (0: none)."""

    floor: int
    log_deleted: int
    checkpoints_deleted: int


# Commits this large since the last checkpoint are checkpointed without waiting for more commits:
# a cold start would otherwise replay them, describing every file again (YAML for each one's
# frontmatter: 1.4 s of CPU for an import of 10,000 files, against 0.24 s), until 32 commits later.
LARGE_COMMITS_BYTES = 1024 * 1024


class Housekeeper:
    """Writes a checkpoint when enough has been committed since the last, and compacts after it.

    A checkpoint is due after `checkpoint_min_commits` commits once the bytes committed since the
    last one reach the live size (edited files counted whole), at once when the text the commits
    carried reaches it and `LARGE_COMMITS_BYTES` too (an import), after `checkpoint_max_commits`
    always, and after a purge. In a fleet (others commit too), only the maker of each commit at a
    multiple of `checkpoint_max_commits`, or of one as large as the memory, writes one: every
    process counting on its own wrote one each. Duplicate checkpoints from racing writers are
    harmless: they are created create-only.
    """

    def __init__(self, log: CommitLog) -> None:
        self.log = log
        log.after_commit = self.after_commit

    async def after_commit(self, purged: bool) -> None:
        if (due := self.log.head.run_due) is not None:
            self.log.head.run_due = None
            await self._run(due)
        state = self.log.cached_state
        if state is None:
            return
        options, head = self.log.options, self.log.head
        counts = state.since_checkpoint
        commits = state.head - counts.seq
        if head.traffic.shared:
            # A fleet: each process counts from the checkpoints it wrote or loaded, not the others',
            # so the count would have every one of them write its own. The maker of every commit
            # at a multiple of the count writes one; a commit as large as the memory, at once.
            made = head.made
            due = (
                made is not None
                and made.seq == state.head
                and (
                    made.seq % options.checkpoint_max_commits == 0
                    or text_bytes(made.changes) >= max(state.live_bytes, LARGE_COMMITS_BYTES)
                )
            )
        else:
            due = (
                commits >= options.checkpoint_max_commits
                or (commits >= options.checkpoint_min_commits and counts.written >= state.live_bytes)
                or counts.carried >= max(state.live_bytes, LARGE_COMMITS_BYTES)
            )
        if not (purged or due):
            return
        async with telemetry.operation("checkpoint", self.log.location):
            await self._checkpoint(state)

    async def _checkpoint(self, state: State) -> None:
        options, counts = self.log.options, state.since_checkpoint
        # Copied in one step on the event loop, so it is the state at exactly one head, then encoded
        # apart from the loop: commits meanwhile change the cached state in place.
        snapshot = state.copy()
        written, carried = counts.written, counts.carried  # what the checkpoint covers
        at = await self.log.objects.now()
        # Joined apart from the loop too: copying 32 MiB into one object is tens of ms of page faults.
        seq, encoded = await off_loop(
            snapshot.live_bytes,
            functools.partial(_encoded, snapshot, options.max_tombstones, at, options.packed_checkpoints),
        )
        # A failure propagates to the log, which logs it; the counts stay, so the next commit retries.
        key = checkpoint_key(seq)
        telemetry.count("bytes_written", len(encoded))
        with contextlib.suppress(AlreadyExists):  # another writer's checkpoint of the same head: as good
            await within_deadline(lambda: self.log.objects.put(key, encoded, CREATE), what=f"Checkpointing {key}")
        # Commits meanwhile were counted on the same object: count on from the checkpoint.
        if counts.seq < seq:
            counts.seq = seq
            counts.written = max(counts.written - written, 0)
            counts.carried = max(counts.carried - carried, 0)
        if options.auto_compact:
            await self.compact_below(seq)

    async def _run(self, seq: int) -> None:
        """Store the run of the commits up to `seq`, ours, for a fleet's readers (`runs.py`)."""
        commits = packable([commit for commit in self.log.head.recent if commit.seq <= seq])
        if len(commits) < 2 or commits[-1].seq != seq:
            return
        encoded = await off_loop(sum(commit.encoded_size for commit in commits), lambda: Run.made(commits).encode())
        key = run_key(seq)
        telemetry.count("bytes_written", len(encoded))
        with contextlib.suppress(
            AlreadyExists
        ):  # a run is there already (ours, sent twice, or another's): readers use it
            await within_deadline(lambda: self.log.objects.put(key, encoded, CREATE), what=f"Storing {key}")

    async def compact(self) -> Compaction:
        """Delete log and checkpoint objects below the newest checkpoint that is older than the grace
        period and outside the history retention."""
        self.log.check_writable()
        async with telemetry.operation("compact", self.log.location):
            state = await self.log.proven_state()
            return await self.compact_below(state.head)

    async def compact_below(self, head: int) -> Compaction:
        """Compaction as of a head the caller has proven (invariants 3 and 4 of `log`)."""
        log, options = self.log, self.log.options
        now = await retrying(
            lambda: log.objects.now(ageing=True), what=f"Compacting {log.location}", attempts=options.request_attempts
        )
        commits, runs = await log.reader.list_log_and_runs()
        checkpoints = await log.reader.list_checkpoints()
        retained = head - options.retain_commits + 1
        young = [seq for seq, info in commits if now - info.modified < options.retain_seconds]
        if young:
            retained = min(retained, min(young))
        anchors = [seq for seq, info in checkpoints if seq <= retained and now - info.modified >= options.grace_period]
        # Intents past their window are dead whatever the anchor: none may be settled any more.
        if expired := [key for key in await log.reader.list_pending() if _expired(key, head)]:
            await retrying(
                functools.partial(log.objects.delete, expired),
                what=f"Compacting {log.location}",
                attempts=options.request_attempts,
            )
        anchor = await self._sound_anchor(sorted(anchors, reverse=True), commits, checkpoints)
        if anchor is None:
            return Compaction(floor=0, log_deleted=0, checkpoints_deleted=0)
        dead_log = [info.key for seq, info in commits if seq < anchor]  # the anchor's own commit stays (3)
        dead_checkpoints = [info.key for seq, info in checkpoints if seq < anchor]
        dead_runs = [run_key(seq) for seq in runs if seq < anchor]
        # Log first: a compaction that dies between the two leaves old checkpoints, which cost nothing.
        for dead in (dead_log, dead_checkpoints, dead_runs):
            if dead:
                await retrying(
                    functools.partial(log.objects.delete, dead),
                    what=f"Compacting {log.location}",
                    attempts=options.request_attempts,
                )
        return Compaction(floor=anchor, log_deleted=len(dead_log), checkpoints_deleted=len(dead_checkpoints))

    async def _sound_anchor(
        self, candidates: list[int], commits: list[tuple[int, ObjectInfo]], checkpoints: list[tuple[int, ObjectInfo]]
    ) -> int | None:
        """The newest of `candidates` that is the log's own checkpoint (it decodes and names the hash
        of the commit at its seq), checked only when compacting below it deletes something: a
        forged or damaged one, which cold starts pass over, must not be what the log below is
        deleted for."""
        log = self.log
        for anchor in candidates:
            if not any(seq < anchor for seq, _ in [*commits, *checkpoints]):
                return anchor  # nothing to delete below it: nothing to check
            try:
                state = await log.reader.load_checkpoint(checkpoint_key(anchor))
                commit = await log.reader.commit(anchor)
            except CorruptObjectError as error:
                logger.warning("%s: compaction passed over %s: %s", log.location, checkpoint_key(anchor), error.reason)
                continue
            if state is not None and commit is not None and state.head_hash == commit.hash:
                return anchor
        return None


def _expired(key: str, head: int) -> bool:
    """An intent past its window, or naming a base no writer can have seen yet (garbage)."""
    parts = intent_key_parts(key)
    return parts is not None and not live(parts[1], head)


def _encoded(state: State, max_tombstones: int, at: float, packed: bool) -> tuple[int, bytes]:
    """The seq of the checkpoint of `state`, and the bytes to store (packed, or of formats 1 and 2)."""
    content = state.checkpoint_content(max_tombstones, at=at)
    checkpoint = PackedCheckpoint.made(content) if packed else Checkpoint.made(content)
    return checkpoint.seq, checkpoint.encode()
