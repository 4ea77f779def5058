"""Which stored checkpoints are the memory's: each first version judged against what the first
versions of the log replay to (`StoredVersions.fits` asks once per listing). A checkpoint an agent
forged, one of a log begun after a wipe, or one past where the log turns into another lineage is
no base for `recover`, `rollback` or a replay."""

from __future__ import annotations

import functools
import logging
from typing import TYPE_CHECKING

from ..format.codec import Commit
from ..format.signed import CorruptObjectError
from ..format.wire_values import checkpoint_key
from ..objects.interface import ObjectVersion
from ..runtime.off_loop import off_loop
from ..state.checkpoint_state import read_checkpoint
from ..state.state import State, same_checkpoint

if TYPE_CHECKING:
    from .versions import StoredVersions

logger = logging.getLogger(__name__)


async def checkpoint_verdicts(stored: StoredVersions, firsts: dict[str, Commit]) -> dict[int, bool]:
    """For each stored checkpoint, whether its first version fits the log's first versions: it
    names its commit's hash and commit 1's, and holds what a replay of them gives, from commit 1
    where the bucket keeps it (else from the oldest checkpoint that names its commit) and, past
    a gap (versions an erase deleted, or expired), from the oldest checkpoint after the gap that
    names its commit; and is not past where they turn into another lineage. (A checkpoint an
    agent created below every other after such a gap is that replay's start: the admitted
    limit, which only a gap opens.)"""
    by_seq = {commit.seq: commit for commit in firsts.values()}
    genesis = by_seq.get(1)
    states = await stored.first_checkpoints()
    verdicts = {
        seq: seq in by_seq
        and state.head_hash == by_seq[seq].hash
        and (genesis is None or state.genesis in (None, genesis.hash))
        for seq, state in states.items()
    }
    # Where commit 1's versions are gone, the oldest checkpoint naming its commit starts.
    replay = State(format=stored.format) if genesis is not None else _oldest_fitting(states, verdicts, after=0)
    while replay is not None:
        replay = await _replay_segment(stored, by_seq, states, verdicts, replay)
        if (following := by_seq.get(replay.head + 1)) is not None and following.prev != replay.head_hash:
            # The first versions go on as another lineage (a writer whose head was older than a
            # wipe, or a log begun again): its checkpoints are no base; its commits are forks.
            for seq in verdicts:
                verdicts[seq] = verdicts[seq] and seq <= replay.head
            break
        replay = _oldest_fitting(states, verdicts, after=replay.head)
    return verdicts


async def _replay_segment(
    stored: StoredVersions,
    by_seq: dict[int, Commit],
    states: dict[int, State],
    verdicts: dict[int, bool],
    replay: State,
) -> State:
    """Replay the first versions of the log on `replay` while they chain, marking each checkpoint
    met that differs from the state replayed; the state where they stop."""
    while (commit := by_seq.get(replay.head + 1)) is not None and commit.prev == replay.head_hash:
        try:
            await off_loop(commit.size, functools.partial(replay.apply, commit, stored.location))
        except CorruptObjectError:
            break  # a damaged text below: what follows cannot be checked from here
        if commit.seq in verdicts:
            await _judge(stored, states, verdicts, replay)
    return replay


async def _judge(stored: StoredVersions, states: dict[int, State], verdicts: dict[int, bool], replay: State) -> None:
    """Mark checkpoint `replay.head` by what the log replays to. Where its first version differs,
    a later version that holds it stands in (`_later_fitting`); else the first is the memory's
    still where it differs only by texts the log erased: an erase stopped before it rewrote the
    checkpoint, and running it again does (taken for disproved, the erase refused to finish)."""
    seq = replay.head
    unerased = False
    if verdicts[seq] and not same_checkpoint(states[seq], replay):
        verdicts[seq], unerased = False, same_checkpoint(states[seq], replay, unerased=True)
        if not unerased:
            logger.warning(
                "%s: the first version of %s is not the state its log replays to", stored.location, checkpoint_key(seq)
            )
    if not verdicts[seq] and (later := await _later_fitting(stored, replay)) is not None:
        states[seq], stored.in_place[checkpoint_key(seq)] = later
        verdicts[seq] = True
    elif unerased:
        verdicts[seq] = True


async def _later_fitting(stored: StoredVersions, replay: State) -> tuple[State, ObjectVersion] | None:
    """A later version of checkpoint `replay.head` that holds what the log replays to (`replay`), for
    where its first version does not: an erase's rewrite (it rewrote the forgery that was current,
    then, once a recover had put the true one back, the true one, and deleted the first version;
    seed 129), or the checkpoint made again at a seq where a recover re-applied a fork's commit
    (the first was made on the fork's commit there, which the recover removed; seed 883). Checked
    against the replay, a later version is taken only where the log vouches for all it holds."""
    key = checkpoint_key(replay.head)
    for version in stored.versions[key][1:]:
        try:
            state = await read_checkpoint(stored.location, key, await stored.read(version), stored.format)
        except CorruptObjectError:
            continue
        if state.head_hash == replay.head_hash and same_checkpoint(state, replay):
            return state, version
    return None


def _oldest_fitting(states: dict[int, State], verdicts: dict[int, bool], *, after: int) -> State | None:
    """A copy of the oldest checkpoint past seq `after` that names its commit (so far), to replay from."""
    return next((states[seq].copy() for seq in sorted(verdicts) if seq > after and verdicts[seq]), None)
