"""Fork commits: what writers committed off a memory's chain after a wipe, found among the versions.

A fork commit is any commit among the stored versions whose `prev` links to the chain, or to a new
commit 1, directly or through other fork commits: a writer whose cached head was older than the
wipe found the next key gone and committed there, or one that could not tell the memory existed
began it again. Recovery re-applies each once, as a commit whose origin marks it (`wire_values.reapplied_fork`).
"""

from __future__ import annotations

import logging

from a13n_harness.providers.memory import MemoryStoreError

from ..format.changes import Change, Edit, Write
from ..format.codec import GENESIS_HASH, Commit
from ..format.signed import CorruptObjectError
from ..format.wire_values import LOG_PREFIX, log_key
from ..objects.retry import gather_bounded
from ..state.state import State
from .versions import StoredVersions, reapplied

logger = logging.getLogger(__name__)

type Fork = tuple[Commit, tuple[Change, ...]]  # a fork commit, with its changes as its writer meant them


async def fork_commits(stored: StoredVersions, firsts: dict[str, Commit], base: int, head: int) -> list[Fork]:
    """The commits of forks off the chain `base`..`head` (or off a new commit 1) that no earlier run
    re-applied, in seq order. Versions that are neither (damage, another memory's objects) are left out."""
    chain = {seq: firsts[log_key(seq)] for seq in range(max(base, 1), head + 1)}
    below = max(base, 1) - 1  # the chain's own history below its base, as far as it links
    while below >= 1 and (older := firsts.get(log_key(below))) is not None and older.hash == chain[below + 1].prev:
        chain[below] = older
        below -= 1
    others = [
        version
        for seq, key in stored.keys(LOG_PREFIX)
        for version in stored.versions[key]
        # A first version below the chain is the memory's own history under a gap (an erase deleted
        # the versions between, or they expired): never a fork.
        if version is not stored.first(key) or seq > head
    ]
    decoded: list[Commit] = []
    for version, data in zip(others, await gather_bounded(others, stored.read), strict=True):
        try:
            commit = await stored.read_commit(version.key, data)
        except CorruptObjectError:
            continue
        first = firsts.get(version.key)
        if version is not stored.first(version.key) and first is not None and first.id == commit.id:
            continue  # its key's own commit, rewritten (by an erase, under a gap the chain does not reach across)
        decoded.append(commit)
    chain_ids = {commit.id for commit in chain.values()}
    roots = await _checkpoints_past(stored, head)
    known = {(seq, commit.hash) for seq, commit in chain.items()} | {(0, GENESIS_HASH)}
    known |= {(state.head, state.head_hash) for state in roots.values()}
    linked: dict[str, Commit] = {}
    for commit in sorted(decoded, key=lambda commit: commit.seq):
        if commit.id in chain_ids or commit.id in linked or (commit.seq - 1, commit.prev) not in known:
            continue
        known.add((commit.seq, commit.hash))
        linked[commit.id] = commit
    # A fork commit that erases with no operator's record is void, as readers found it when it was
    # current: nothing of it is re-applied, so it is no fork to name or re-apply (its descendants are).
    void = {commit.id for commit in linked.values() if not commit.erasure_authorized}
    # One with no change (a fold whose intents were all refused) re-applies as nothing, and so is
    # never marked re-applied: named, it would be named after every recover (seed 475).
    void |= {commit.id for commit in linked.values() if not commit.changes}
    return await _as_written(stored, chain, roots, list(linked.values()), set(linked) - reapplied(firsts) - void)


async def _checkpoints_past(stored: StoredVersions, head: int) -> dict[str, State]:
    """The first versions of checkpoints past the chain's head, by the hash they name: a cold writer
    that loaded one (forged far past the log) built its commits on it, and those are acknowledged
    writes too. One below the head is the memory's own (or disproved by its log): no root."""
    checkpoints = await stored.first_checkpoints()
    return {state.head_hash: state for seq, state in checkpoints.items() if seq > head}


async def _as_written(
    stored: StoredVersions, chain: dict[int, Commit], roots: dict[str, State], linked: list[Commit], wanted: set[str]
) -> list[Fork]:
    """The `wanted` fork commits, each with its changes as its writer meant them: an edit, made
    against the fork's own text, becomes a write of the whole text it made. `linked` holds every
    fork commit in seq order (those re-applied before too, whose texts later ones may edit)."""
    if not any(isinstance(change, Edit) for commit in linked for change in commit.changes):
        return [(commit, commit.changes) for commit in linked if commit.id in wanted]
    after = dict(roots)  # by commit hash: the state each fork commit made (or a checkpoint names)
    written: list[Fork] = []
    for commit in linked:
        base = after.get(commit.prev)
        if base is None:
            base = State(format=stored.format) if commit.seq == 1 else await stored.replayed(chain, commit.seq - 1)
        changes = commit.changes
        if base is not None:
            state, whole = base.copy(), []
            try:
                for change in commit.changes:
                    if isinstance(change, Edit):
                        change = Write(path=change.path, text=state.edited(change), origin=change.origin)
                    state.apply_change(change, commit.seq)
                    whole.append(change)
                after[commit.hash], changes = state, tuple(whole)
            except MemoryStoreError as error:
                logger.warning("%s: fork commit %s does not apply: %s", stored.location, commit.seq, error)
        elif any(isinstance(change, Edit) for change in commit.changes):
            logger.warning(
                "%s: no stored state is the base of fork commit %s; its edits apply only where the text fits",
                stored.location,
                commit.seq,
            )
        if commit.id in wanted:
            written.append((commit, changes))
    return written
