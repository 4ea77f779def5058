"""An erase's rewrites standing in for the first versions it deleted.

Recovery takes the first stored version of each key for the memory's own. An erase deletes every
version that holds the erased text, a key's first among them, and leaves its rewrite; where an
agent put a version at the key before (a forged commit after deleting the true one, a forged
checkpoint), that forgery is then the oldest version left. This finds the rewrite of a commit that
takes the deleted first version's place (for a checkpoint, any later version that holds what the
log replays to stands in: `versions.py`). Only a rewrite stands in for a commit: a first version
still kept is never displaced.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..format.changes import Edit, Erase, Write
from ..format.codec import Commit
from ..format.signed import CorruptObjectError
from ..format.wire_values import log_key
from ..objects.interface import ObjectVersion

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
    records = sorted(await stored.erasure_records(), key=lambda record: -record.seq)
    erased = {record.seq: _erased_paths(firsts.get(log_key(record.seq)), record.commit) for record in records}
    for record in records:
        seq, wanted = record.seq, record.commit
        while (key := log_key(seq)) in stored.versions and key not in walked:
            found = await _version_with_hash(stored, key, wanted, firsts.get(key), erased)
            if found is None:
                break
            commit, version = found
            if version is not None:
                pinned[key] = (commit, version)
            walked.add(key)
            seq, wanted = seq - 1, commit.prev
    return pinned


async def _version_with_hash(
    stored: StoredVersions, key: str, wanted: str, first: Commit | None, erased: dict[int, frozenset[str]]
) -> tuple[Commit, ObjectVersion | None] | None:
    """The oldest later version of `key` that is an erase's rewrite of the commit with hash
    `wanted` (each text it erased, erased by a recorded erasure of its path), else the first
    version (version None) if it has that hash; None when neither is stored. The rewrite comes
    first: an erase killed before deleting the first version leaves it, and recover must not put
    the text back (seed 95)."""
    for version in stored.versions[key][0 if first is None else 1 :]:
        try:
            commit = await stored.read_commit(key, await stored.read(version))
        except CorruptObjectError:
            continue
        rewrites = [change for change in commit.changes if isinstance(change, Write | Edit) and change.erased]
        if (
            commit.hash == wanted
            and rewrites
            and all(change.path in erased.get(change.erased or 0, ()) for change in rewrites)
        ):
            return commit, version
    if first is not None and first.hash == wanted:
        return first, None
    return None


def _erased_paths(erasure: Commit | None, recorded: str) -> frozenset[str]:
    """The paths the erasure commit a record names erases (none when its first version is not it)."""
    if erasure is None or erasure.hash != recorded:
        return frozenset()
    return frozenset(change.path for change in erasure.changes if isinstance(change, Erase))
