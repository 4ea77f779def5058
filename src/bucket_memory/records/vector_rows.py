"""The stored vectors of one group of records in one space, as a normalized float32 matrix.

Stored vectors are hostile: one whose model or length is not the space's, whose base64 does not
decode, or whose values are not all finite is left out, and its slot listed as missing (the record
is embedded again). Building decodes the base64 of each record once and converts them all in one
numpy call; merging groups copies rows and never decodes again.
"""

from __future__ import annotations

import binascii
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .embedding import Space
from .record_format import RecordBody, unpacked

if TYPE_CHECKING:
    import numpy


@dataclass(frozen=True, slots=True)
class Rows:
    """Unit vectors (`matrix`, one row per record that has a usable one) and the slot of each row;
    `missing` lists the slots that have none in this space."""

    matrix: numpy.ndarray  # float32, (rows, dimensions)
    slots: numpy.ndarray  # int32
    missing: numpy.ndarray  # int32

    @classmethod
    def of(cls, bodies: Sequence[RecordBody], space: Space) -> Rows:
        import numpy

        width = 2 * space.dimensions
        encoded = 4 * ((width + 2) // 3)  # the base64 of exactly `width` bytes
        slots, texts = [], []
        for slot, body in enumerate(bodies):
            stored = body.vector_of(space.model, space.dimensions)
            if stored is not None and len(stored.vector) == encoded:
                slots.append(slot)
                texts.append(stored.vector)
        data, decoded = _decoded(texts, width)
        matrix = numpy.frombuffer(data, dtype="<f2").reshape(len(texts), space.dimensions).astype(numpy.float32)
        usable = numpy.isfinite(matrix).all(axis=1) & numpy.asarray(decoded, dtype=bool)
        matrix, found = matrix[usable], numpy.asarray(slots, dtype=numpy.int32)[usable]
        norms = numpy.linalg.norm(matrix, axis=1, keepdims=True)
        numpy.divide(matrix, norms, out=matrix, where=norms > 0)
        have = numpy.zeros(len(bodies), dtype=bool)
        have[found] = True
        return cls(matrix, found, numpy.flatnonzero(~have).astype(numpy.int32))

    @classmethod
    def merged(cls, parts: Sequence[tuple[Rows, numpy.ndarray]]) -> Rows:
        """The rows of the slots each part keeps (a bool mask of its slots), renumbered in order."""
        import numpy

        matrices, slots, missing = [], [], []
        base = 0
        for rows, keep in parts:
            renumbered = numpy.cumsum(keep) - 1 + base
            kept = keep[rows.slots]
            matrices.append(rows.matrix[kept])
            slots.append(renumbered[rows.slots[kept]])
            missing.append(renumbered[rows.missing[keep[rows.missing]]])
            base += int(keep.sum())
        return cls(
            numpy.concatenate(matrices),
            numpy.concatenate(slots).astype(numpy.int32),
            numpy.concatenate(missing).astype(numpy.int32),
        )

    def scores(self, target: numpy.ndarray, live: numpy.ndarray) -> tuple[numpy.ndarray, numpy.ndarray]:
        """The live slots that have a row, and their cosine similarity to the unit vector `target`."""
        found = self.matrix @ target  # over the dead rows too: cheaper than copying the live ones out
        alive = live[self.slots]
        return (self.slots, found) if alive.all() else (self.slots[alive], found[alive])


def _decoded(texts: list[str], width: int) -> tuple[bytes, list[bool]]:
    """The stored vectors' bytes, `width` each (zeros for one that does not decode), and which
    decoded. Vectors whose bytes are a multiple of 3 have no padding, so all of them together are
    one base64 text (its alphabet was checked when the records were decoded): one call, not one each."""
    if width % 3 == 0 and texts:
        joined = "".join(texts)
        if "=" not in joined:
            return binascii.a2b_base64(joined), [True] * len(texts)
    found = [unpacked(text) for text in texts]
    decoded = [one is not None and len(one) == width for one in found]
    return b"".join(one if ok and one else bytes(width) for one, ok in zip(found, decoded, strict=True)), decoded
