"""Erasures made before erasure records existed: `erase` on a path adopts the ones its writers
applied, on the operator's word, and never an agent's forgery that only looks applied."""

from __future__ import annotations

from ..files.store import LogFileStore
from ..format.changes import Purge
from ..format.codec import Commit
from ..format.erasure_record import erased_paths
from .chain import History
from .lineage import named_paths


async def record_earlier_erasures(store: LogFileStore, path: str) -> bool:
    """Record the erasures of `path` in the retained log that releases before erasure records
    committed: an unrecorded erasure whose next checkpoint no longer holds the path (its writer
    applied it; under this release an unrecorded one is void, and the checkpoint after it keeps
    the file) and that deleted a file. Whether there were any: the operator, running `erase` on
    the path, vouches for them."""
    commits = await History(store).commits()
    checkpoints = [seq for seq, _ in await store.reader.list_checkpoints()]
    recorded = False
    for commit in commits:
        if commit.erasure_authorized or path not in erased_paths(commit):
            continue
        after = next((seq for seq in checkpoints if seq >= commit.seq), None)
        names = erased_paths(commit)
        if after is None or names & set((await History(store).state_at(after)).files):
            continue
        if any(_touches(later, names) for later in commits if commit.seq < later.seq <= after):
            continue  # a later change, not the erase, took the path out of that checkpoint (seed 1739)
        if not names & set((await History(store).state_at(commit.seq - 1)).files):
            continue  # it deleted nothing: no release's erasure, and nothing to adopt
        await store.reader.erasures.create(commit, commit.moment.timestamp())
        recorded = True
    return recorded


def _touches(commit: Commit, names: set[str]) -> bool:
    """Whether `commit` changes a file at one of `names` (a purge changes every file)."""
    return any(isinstance(change, Purge) or names & set(named_paths(change)) for change in commit.changes)
