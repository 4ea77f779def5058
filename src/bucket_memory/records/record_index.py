"""The records of one store, decoded and indexed once, brought up to date from the log's change feed.

A `Snapshot` is the records as of one head, in segments: groups of records decoded and indexed
together (BM25 postings, and per embedding space a matrix of unit vectors), never changed once
built. A change makes a new snapshot that shares every segment it does not touch: the records
changed since the last head form a new segment, and the segments that held their old versions
get a new mask of live records. Small segments merge as they come (each at most half the one
before it), so there are about log2(records) of them and every record is copied O(log records)
times. A search ranks on the snapshot it took, whatever other searches do meanwhile.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from a13n_harness.providers.memory import MemoryStoreError

from ..state.change_feed import changes_since
from ..state.live_file import LiveFile
from ..state.state import State
from .analyzer import Analyzer
from .bm25 import Corpus, Postings
from .embedding import Space
from .record_format import RecordBody, record_id
from .vector_rows import Rows

if TYPE_CHECKING:
    import numpy

logger = logging.getLogger(__name__)

type Record = tuple[str, int, RecordBody]  # id, its file's version, the record
type _Step = Callable[[], "Snapshot | None"]
_SPACES = 2  # embedding spaces a segment keeps rows for: the embedder's, and one it moves from or to


@dataclass(slots=True)
class _Built:
    """What a segment's records make, built on first use: the BM25 postings and, per embedding
    space, the matrix of their stored vectors. Shared by the segment's copies, whose records are
    the same; two threads building the same thing at once both build it, harmlessly."""

    postings: Postings | None = None
    spaces: dict[Space, Rows] = field(default_factory=dict)


@dataclass(frozen=True, slots=True, eq=False)
class Segment:
    """Records decoded and indexed together. Only which of them are live changes, in a copy."""

    ids: tuple[str, ...]
    versions: tuple[int, ...]
    bodies: tuple[RecordBody, ...]
    slots: dict[str, int]
    live: numpy.ndarray  # bool, per slot
    count: int  # live records
    built: _Built

    @classmethod
    def of(cls, records: Sequence[Record], built: _Built | None = None) -> Segment:
        import numpy

        ids = tuple(found for found, _, _ in records)
        return cls(
            ids=ids,
            versions=tuple(version for _, version, _ in records),
            bodies=tuple(body for _, _, body in records),
            slots={found: slot for slot, found in enumerate(ids)},
            live=numpy.ones(len(ids), dtype=bool),
            count=len(ids),
            built=built or _Built(),
        )

    @classmethod
    def merged(cls, parts: Sequence[Segment]) -> Segment:
        """One segment of the live records of `parts`, in order, with what all of them have built."""
        records = [
            (part.ids[slot], part.versions[slot], part.bodies[slot])
            for part in parts
            for slot in part.live.nonzero()[0].tolist()
        ]
        built = _Built()
        analyzers = {part.built.postings.analyzer if part.built.postings else None for part in parts}
        if len(analyzers) == 1 and (analyzer := analyzers.pop()) is not None:
            built.postings = Postings.merged([(part.postings(analyzer), part.live) for part in parts], analyzer)
        for space in set.intersection(*(set(part.built.spaces) for part in parts)):
            built.spaces[space] = Rows.merged([(part.built.spaces[space], part.live) for part in parts])
        return cls.of(records, built)

    def without(self, slots: Sequence[int]) -> Segment:
        live = self.live.copy()
        live[list(slots)] = False
        return replace(self, live=live, count=int(live.sum()))

    def postings(self, analyzer: Analyzer) -> Postings:
        """The records' postings of `analyzer`'s terms, built on first use (again for another analyzer)."""
        built = self.built.postings
        if built is None or built.analyzer != analyzer:
            built = self.built.postings = Postings.of([body.text for body in self.bodies], analyzer)
        return built

    def words(self, analyzer: Analyzer) -> float:
        """The live records' length in BM25 terms."""
        return float(self.postings(analyzer).lengths[self.live].sum())

    def rows(self, space: Space) -> Rows:
        """The stored vectors of `space`, built on first use (only the spaces last used are kept)."""
        spaces = self.built.spaces
        found = spaces.get(space)
        if found is None:
            found = Rows.of(self.bodies, space)
            while len(spaces) >= _SPACES:
                spaces.pop(next(iter(spaces)), None)
            spaces[space] = found
        return found


@dataclass(frozen=True, slots=True, eq=False)
class Made:
    """Vectors made in this process for records stored without one of its space (a read-only store
    cannot write them back), each for the version of the record it was made from."""

    matrix: numpy.ndarray  # float32 unit rows
    ids: tuple[str, ...]

    def without(self, gone: set[str]) -> Made | None:
        keep = [n for n, found in enumerate(self.ids) if found not in gone]
        if len(keep) == len(self.ids):
            return self
        return Made(self.matrix[keep], tuple(self.ids[n] for n in keep)) if keep else None


@dataclass(frozen=True, slots=True, eq=False)
class Snapshot:
    """The records as of commit `head` of the memory named `genesis`; never changed."""

    head: int
    genesis: str | None
    segments: tuple[Segment, ...]
    made: dict[Space, Made]

    @classmethod
    def built(cls, head: int, genesis: str | None, files: Sequence[tuple[str, LiveFile | None]]) -> Snapshot:
        records = [(found, live.version, body) for found, live, body in _decoded(files)]
        return cls(head, genesis, _merging([Segment.of(records)] if records else []), {})

    def advanced(self, head: int, files: Sequence[tuple[str, LiveFile | None]]) -> Snapshot:
        """This snapshot with `files` (the paths changed since, as they are at `head`: None when
        deleted) applied; paths that are not records' are passed over."""
        gone: dict[int, list[int]] = {}
        changed = set()
        for path, _ in files:
            found = record_id(path)
            if found is None:
                continue
            changed.add(found)
            if (where := self.find(found)) is not None:
                gone.setdefault(where[0], []).append(where[1])
        fresh = [(found, live.version, body) for found, live, body in _decoded(files)]
        segments = [segment.without(gone[n]) if n in gone else segment for n, segment in enumerate(self.segments)]
        if fresh:
            segments.append(Segment.of(fresh))
        made = {space: kept for space, made in self.made.items() if (kept := made.without(changed)) is not None}
        return Snapshot(head, self.genesis, _merging(segments), made)

    def with_made(self, space: Space, matrix: numpy.ndarray, ids: Sequence[str]) -> Snapshot:
        import numpy

        before = self.made.get(space)
        if before is not None:
            matrix, ids = numpy.concatenate([before.matrix, matrix]), (*before.ids, *ids)
        return replace(self, made={**self.made, space: Made(matrix, tuple(ids))})

    def find(self, wanted: str) -> tuple[int, int] | None:
        """The segment and slot of the live record `wanted`."""
        for n, segment in enumerate(self.segments):
            slot = segment.slots.get(wanted)
            if slot is not None and segment.live[slot]:
                return n, slot
        return None

    def body(self, wanted: str) -> RecordBody:
        where = self.find(wanted)
        assert where is not None, "ranked records are live"
        return self.segments[where[0]].bodies[where[1]]

    def records(self) -> Iterator[Record]:
        for segment in self.segments:
            for slot in segment.live.nonzero()[0].tolist():
                yield segment.ids[slot], segment.versions[slot], segment.bodies[slot]

    def count(self) -> int:
        return sum(segment.count for segment in self.segments)

    def corpus(self, analyzer: Analyzer) -> Corpus:
        return Corpus(self.count(), sum(segment.words(analyzer) for segment in self.segments))

    def missing(self, space: Space) -> list[Record]:
        """The live records with no usable vector of `space`, stored or made, nor marked refused in it."""
        made = self.made.get(space)
        have = set(made.ids) if made is not None else set()
        found = []
        for segment in self.segments:
            absent = segment.rows(space).missing
            for slot in absent[segment.live[absent]].tolist():
                body = segment.bodies[slot]
                marked = body.vector_of(space.model, space.dimensions)
                if segment.ids[slot] not in have and (marked is None or not marked.refused):
                    found.append((segment.ids[slot], segment.versions[slot], body))
        return found


class RecordIndex:
    """One store's current snapshot, advanced from the states its searches read.

    Advancing runs in a worker thread under a lock, so two searches never build the same thing
    twice; a snapshot at or past the state asked for is used as it is (it was current during the
    call too). A search holds the snapshot it took; the next one is swapped in whole.
    """

    def __init__(self) -> None:
        self._current: Snapshot | None = None
        self._lock = threading.Lock()

    async def at(self, state: State) -> Snapshot:
        while True:
            current = self._current
            same = current is not None and current.genesis == state.genesis
            if current is not None and same and current.head >= state.head:
                return current
            changed = changes_since(state, current.head) if current is not None and same else None
            # Copied here, decoded by `step`: the state changes in place under later commits.
            if changed is None:
                step = self._step(state.head, state.genesis, list(state.files.items()), None)
            else:
                step = self._step(state.head, state.genesis, [(p, state.files.get(p)) for p in changed], current)
            # A few changes are applied here, unless a build holds the lock: the loop never waits on it.
            if changed is not None and len(changed) < 64 and self._lock.acquire(blocking=False):
                try:
                    advanced = guarded(step)
                finally:
                    self._lock.release()
            else:
                advanced = await asyncio.to_thread(self._locked, step)
            if advanced is not None:
                return advanced

    def keep_made(self, before: Snapshot, after: Snapshot) -> None:
        """Make `after` (`before` with vectors made) current, unless another search moved on from
        `before`, or a build holds the lock (the search keeps `after` either way)."""
        if self._lock.acquire(blocking=False):
            try:
                if self._current is before:
                    self._current = after
            finally:
                self._lock.release()

    def _locked(self, step: _Step) -> Snapshot | None:
        with self._lock:
            return guarded(step)

    def _step(
        self, head: int, genesis: str | None, files: Sequence[tuple[str, LiveFile | None]], base: Snapshot | None
    ) -> _Step:
        """What makes the snapshot at `head` current, run with the lock held: from `files` (every
        file, or those changed since `base`); None when another memory or an older snapshot is
        current by then, and the state must be read again."""

        def step() -> Snapshot | None:
            current = self._current
            if current is not None and current.genesis == genesis and current.head >= head:
                return current
            if base is None:
                self._current = Snapshot.built(head, genesis, files)
            elif current is None or current.genesis != genesis or current.head < base.head:
                return None
            else:  # the changes since `base`, where `current` may be later: applying them again is harmless
                self._current = current.advanced(head, files)
            return self._current

        return step


def guarded[T](work: Callable[[], T]) -> T:
    """`work` (indexing or ranking records), with a failure of numpy's (memory, a shape it refuses)
    as `unavailable` rather than a raw error; the traceback goes to the log."""
    try:
        return work()
    except (MemoryStoreError, ImportError):  # an ImportError is a missing extra, named by `records_extra`
        raise
    except Exception as error:
        logger.exception("indexing or ranking records failed")
        raise MemoryStoreError(
            "unavailable", f"Ranking the records failed ({type(error).__name__}: {str(error)[:300]}); try again."
        ) from None


def _decoded(files: Sequence[tuple[str, LiveFile | None]]) -> Iterator[tuple[str, LiveFile, RecordBody]]:
    for path, live in files:
        found = record_id(path)
        if found is not None and live is not None and (body := RecordBody.decode(live.text)) is not None:
            yield found, live, body


def _merging(segments: list[Segment]) -> tuple[Segment, ...]:
    """Segments each more than twice the live records of the next (merging those that are not),
    none of them more than half dead, none empty."""
    kept: list[Segment] = []
    for segment in segments:
        if segment.count == 0:
            continue
        if segment.count * 2 < len(segment.ids):
            segment = Segment.merged([segment])
        kept.append(segment)
        while len(kept) > 1 and kept[-1].count * 2 >= kept[-2].count:
            last = kept.pop()
            kept[-1] = Segment.merged([kept[-1], last])
    return tuple(kept)
