"""The operator's erasure records under `erasures/`, as one memory's readers and operators use them:
every commit read from the bucket that erases is checked against its record before anyone applies
it, and operator work reads them all for the paths erased, compacted commits included."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from ..format.changes import Erase
from ..format.codec import Commit
from ..format.erasure_record import ErasureRecord
from ..format.signed import CorruptObjectError
from ..format.wire_values import ERASURES_PREFIX, erasure_record_key, erasure_record_parts, time_text
from ..objects.interface import CREATE, AlreadyExists
from ..objects.retry import gather_bounded, retrying

if TYPE_CHECKING:
    from .reader import LogReader

logger = logging.getLogger(__name__)


class ErasureRecords:
    """Reads and writes the erasure records of the memory `reader` reads. A verdict, once read, is
    kept: a record is created before its commit can be read and is never changed or deleted (only
    a record whose commit lost its seq is, by the operator that made it), so the answer for one
    commit never changes."""

    def __init__(self, reader: LogReader) -> None:
        self.reader = reader
        self._verdicts: dict[tuple[int, str], bool] = {}

    async def authorize(self, commit: Commit) -> Commit:
        """`commit`, noted as an erasure or not (`Commit.erasure_authorized`): one GET for a commit
        that erases, none for any other."""
        if commit.erasure_authorized is not None:
            return commit
        found = self._verdicts.get((commit.seq, commit.hash))
        if found is None:
            record = await self._read(erasure_record_key(commit.seq, commit.hash))
            found = record is not None and record.names(commit)
            self._verdicts[(commit.seq, commit.hash)] = found
        return commit.authorize(found)

    async def all(self) -> list[ErasureRecord]:
        """Every record that decodes, oldest first (a record that does not is logged: only an
        operator can write one, so it is damage, and the erasure it stood for is still in the log)."""
        listed = [
            info.key
            for info in await self.reader.list_keys(ERASURES_PREFIX)
            if erasure_record_parts(info.key) is not None
        ]
        records = await gather_bounded(listed, self._read)
        return [record for record in records if record is not None]

    async def create(self, commit: Commit, at: float) -> str:
        """Record erasure commit `commit` before it is created; the record's key."""
        key = erasure_record_key(commit.seq, commit.hash)
        data = ErasureRecord.of(commit, time_text(at)).encode()
        objects = self.reader.objects
        # A second attempt after a lost reply finds its own record: the same bytes, nothing to do.
        try:
            await retrying(lambda: objects.put(key, data, CREATE), what=f"Recording the erasure at {key}")
        except AlreadyExists:
            if await self.reader.get(key) != data:
                raise CorruptObjectError(self.reader.location, key, "another erasure record holds its key") from None
        self._verdicts[(commit.seq, commit.hash)] = True
        return key

    async def forget(self, key: str) -> None:
        """Delete the record of an erasure commit that never landed (it lost its seq)."""
        objects = self.reader.objects
        await retrying(lambda: objects.delete([key]), what=f"Deleting the unused erasure record {key}")

    async def _read(self, key: str) -> ErasureRecord | None:
        data = await self.reader.get(key)
        if data is None:
            return None
        try:
            return ErasureRecord.decode(self.reader.location, key, data)
        except CorruptObjectError as error:
            logger.warning("%s: %s", self.reader.location, error)
            return None


class RecordedAttempts:
    """The records one erasure's commit attempts create, each before its commit is (`before_create`,
    the commit path's hook). Once an attempt lands (`landed`), the others name commits that never
    existed at their seqs, and are deleted."""

    def __init__(self, records: ErasureRecords) -> None:
        self.records = records
        self._made: dict[int, str] = {}  # seq -> record key, of the attempts so far

    async def before_create(self, commit: Commit) -> None:
        """Record `commit` if it erases (a plan may have left its erasure out)."""
        if any(isinstance(change, Erase) for change in commit.changes):
            self._made[commit.seq] = await self.records.create(commit, await self.records.reader.objects.now())

    async def landed(self, seq: int | None) -> None:
        """Delete the records of every attempt but the one that landed at `seq` (None: none did)."""
        for lost in [key for made, key in self._made.items() if made != seq]:
            await self.records.forget(lost)
        self._made.clear()
