"""The operator's record of an erasure: what makes an `erase` change in the log an erasure.

Agents hold PutObject under the memory's prefix and so can create any log key with any commit,
an `erase` change among them. The record is stored under `erasures/`, which the generated agent
policies and the Terraform modules deny agents to write or delete, before the erasure commit is
created: a commit that erases is an erasure only where a record at its seq names its hash and
exactly the paths it erases. Compaction never deletes a record, so the erased paths outlive the
commits that erased them.
"""

from __future__ import annotations

from typing import Literal

from pydantic import model_validator

from .canonical_json import canonical
from .changes import Erase, Wire
from .codec import Commit
from .signed import CorruptObjectError
from .wire_values import MAX_OBJECT_BYTES, Hash, Seq, Time, WirePath, erasure_record_parts

# Records name a few paths each; anything larger is not one a writer made.
MAX_RECORD_BYTES = 1024 * 1024


class ErasureRecord(Wire):
    """The operator's word that its erasure commit `seq`, whose hash is `commit`, erases `paths`
    (sorted, each once), made at `time` (the server's clock as the operator knew it)."""

    kind: Literal["erasure"] = "erasure"
    format: Literal[1] = 1
    seq: Seq
    commit: Hash
    paths: tuple[WirePath, ...]
    time: Time

    @model_validator(mode="after")
    def _paths_sorted_once(self) -> ErasureRecord:
        if not self.paths or list(self.paths) != sorted(set(self.paths)):
            raise ValueError("an erasure record names its paths sorted, each once")
        return self

    @classmethod
    def of(cls, commit: Commit, time: str) -> ErasureRecord:
        """The record of erasure commit `commit`."""
        return cls(seq=commit.seq, commit=commit.hash, paths=tuple(sorted(erased_paths(commit))), time=time)

    def encode(self) -> bytes:
        return canonical(self.model_dump(mode="json"))

    def names(self, commit: Commit) -> bool:
        """Whether this record makes `commit` an erasure: its seq, its hash and every path it erases."""
        return (
            self.seq == commit.seq and self.commit == commit.hash and self.paths == tuple(sorted(erased_paths(commit)))
        )

    @classmethod
    def decode(cls, location: str, key: str, data: bytes) -> ErasureRecord:
        """The record stored at `key`, or `CorruptObjectError`: hostile bytes, as any object's."""
        parts = erasure_record_parts(key)
        if len(data) > min(MAX_RECORD_BYTES, MAX_OBJECT_BYTES):
            raise CorruptObjectError(location, key, f"{len(data)} bytes, more than any erasure record")
        try:
            record = cls.model_validate_json(data, strict=True)
        except ValueError as error:
            raise CorruptObjectError(location, key, f"not an erasure record ({type(error).__name__})") from None
        if record.encode() != data:
            raise CorruptObjectError(location, key, "not in the canonical form the store writes")
        if parts != (record.seq, record.commit):
            raise CorruptObjectError(location, key, "it names another commit than its key")
        return record


def erased_paths(commit: Commit) -> set[str]:
    """The paths a commit's `erase` changes name."""
    return {change.path for change in commit.changes if isinstance(change, Erase)}
