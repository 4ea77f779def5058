"""An erase's rewrites standing in for the first versions it deleted.

Recovery takes the first stored version of each key for the memory's own. An erase deletes every
version that holds the erased text, a key's first among them, and leaves its rewrite; where an
agent put a version at the key before (a forged commit after deleting the true one, a forged
checkpoint), that forgery is then the oldest version left. These find the rewrite that takes the
deleted first version's place. Only a rewrite stands in: a first version still kept is never displaced.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..format.changes import Edit, Write
from ..format.codec import Commit, CorruptObjectError
from ..format.wire_values import checkpoint_key, log_key
from ..objects.interface import ObjectVersion
from ..state.checkpoint_state import read_checkpoint
from ..state.state import State, same_checkpoint

if TYPE_CHECKING:
    from .versions import StoredVersions


async def pinned_by_erasures(
    stored: StoredVersions, firsts: dict[str, Commit]
) -> dict[str, tuple[Commit, ObjectVersion]]:
    """The log keys (with the commit and version to take) where the chain below an operator's
    erasure runs through an erase's rewrite instead of the key's first version (`firsts`). The
    record names the erasure commit's hash, which chains through every commit below it."""
    pinned: dict[str, tuple[Commit, ObjectVersion]] = {}
    walked: set[str] = set()
    for record in sorted(await stored.erasure_records(), key=lambda record: -record.seq):
        seq, wanted = record.seq, record.commit
        while (key := log_key(seq)) in stored.versions and key not in walked:
            found = await _version_with_hash(stored, key, wanted, firsts.get(key))
            if found is None:
                break
            commit, version = found
            if version is not None:
                pinned[key] = (commit, version)
            walked.add(key)
            seq, wanted = seq - 1, commit.prev
    return pinned


async def _version_with_hash(
    stored: StoredVersions, key: str, wanted: str, first: Commit | None
) -> tuple[Commit, ObjectVersion | None] | None:
    """The first version of `key` (version None) if its commit has hash `wanted`, else the oldest
    later one that is an erase's rewrite of that commit; None when neither is stored."""
    if first is not None and first.hash == wanted:
        return first, None
    for version in stored.versions[key][0 if first is None else 1 :]:
        try:
            commit = await stored.read_commit(key, await stored.read(version))
        except CorruptObjectError:
            continue
        if commit.hash == wanted and any(
            isinstance(change, Write | Edit) and change.erased is not None for change in commit.changes
        ):
            return commit, version
    return None


async def rewrite_fitting(stored: StoredVersions, replay: State) -> tuple[State, ObjectVersion] | None:
    """An erase's rewrite of checkpoint `replay.head` that holds what the log replays to (`replay`),
    for where its first version does not: an erase rewrote the forgery that was current, then
    (once a recover had put the true one back) the true one, and deleted the first version."""
    key = checkpoint_key(replay.head)
    for version in stored.versions[key][1:]:
        try:
            state = await read_checkpoint(stored.location, key, await stored.read(version), stored.format)
        except CorruptObjectError:
            continue
        erased = any(live.erased is not None for live in state.files.values())
        if erased and state.head_hash == replay.head_hash and same_checkpoint(state, replay):
            return state, version
    return None
