"""A record's file: its path (`<32 hex digits>.json`) and its text, the canonical JSON of a `RecordBody`.

Reading is hostile: a file that does not decode to a record exactly (another name, other fields,
not canonical) is not a record, and a stored vector that is not one (bad base64, an odd byte
count, a value that is not finite) reads as missing, never as an error.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from dataclasses import dataclass, replace
from datetime import datetime
from json.encoder import encode_basestring
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy

ID_PATTERN = re.compile(r"[0-9a-f]{32}")
SUFFIX = ".json"
_TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", re.ASCII)
_BASE64 = re.compile(r"[A-Za-z0-9+/]*={0,2}")
_VECTOR, _MARK = frozenset({"model", "vector"}), frozenset({"dimensions", "model", "reason", "vector"})
_REQUIRED, _ALL = frozenset({"text", "updated_at"}), frozenset({"text", "updated_at", "embedding", "embeddings"})


@dataclass(frozen=True, slots=True)
class Embedding:
    """A record's vector in one space (`embedding.Space`: a model, as "provider:model", and a number
    of dimensions): its values as base64 of little-endian float16 (2 bytes a dimension, so their
    length says the dimensions; 10,000 records of 1,536 dimensions take 40 MB). An empty vector
    marks a text the space's model failed on alone (`refused`), with that failure as `reason` and
    the space's `dimensions` (None in marks written before spaces had them: every size of the
    model): it is searched by words, and not sent again until its text changes. No field has a
    length limit of its own: the file's (`FileFormat.max_file_bytes`) bounds them all."""

    model: str
    vector: str  # in base64's alphabet, so its JSON needs no escapes
    dimensions: int | None = None  # a mark's; a vector's is its length
    reason: str = ""  # a mark's: what the model raised

    @property
    def refused(self) -> bool:
        return not self.vector

    @property
    def size(self) -> int | None:
        """The dimensions of the space this vector (or mark) belongs to; None: a mark of every size."""
        if self.refused:
            return self.dimensions
        padding = len(self.vector) - len(self.vector.rstrip("="))
        return (len(self.vector) // 4 * 3 - padding) // 2

    def of(self, model: str, dimensions: int) -> bool:
        """Whether this is a vector or mark of the space `model` at `dimensions`."""
        return self.model == model and self.size in (dimensions, None)

    def encode(self) -> str:
        model = encode_basestring(self.model)
        if self.dimensions is None:
            return f'{{"model":{model},"vector":"{self.vector}"}}'
        reason = encode_basestring(self.reason)
        return f'{{"dimensions":{self.dimensions},"model":{model},"reason":{reason},"vector":"{self.vector}"}}'


# Vectors a record keeps, one a space, the latest written first: a fleet rolling out a new model
# or size has two at once; a fifth space's vector drops the one written longest ago.
MAX_VECTORS = 4


@dataclass(frozen=True, slots=True)
class RecordBody:
    """What a record's file holds: its text, when it was written (as commits record times), and its
    vectors, at most one a space (model and dimensions), latest first. Its file is the canonical JSON of these (sorted
    keys, no spaces, UTF-8): one vector as `embedding` (as versions before several models wrote,
    so they still read it), several as the list `embeddings`, none left out."""

    text: str
    updated_at: str
    embeddings: tuple[Embedding, ...] = ()

    def vector_of(self, model: str, dimensions: int) -> Embedding | None:
        """The vector or mark this record holds in the space `model` at `dimensions`."""
        return next((stored for stored in self.embeddings if stored.of(model, dimensions)), None)

    def with_vector(self, embedding: Embedding) -> RecordBody:
        """This record with `embedding` as its space's vector, first, in place of that space's (and
        of a mark of its model from before marks named a size); the others kept, up to `MAX_VECTORS`."""
        others = tuple(
            stored
            for stored in self.embeddings
            if stored.model != embedding.model or stored.size not in (embedding.size, None)
        )
        return replace(self, embeddings=(embedding, *others)[:MAX_VECTORS])

    def encode(self) -> str:
        # The canonical JSON of a record, whose keys and nesting are fixed, without walking a dict:
        # the same text as `canonical_json.canonical`, at a third of the cost.
        fields = f'"text":{encode_basestring(self.text)},"updated_at":{encode_basestring(self.updated_at)}}}'
        match self.embeddings:
            case ():
                return "{" + fields
            case (one,):
                return f'{{"embedding":{one.encode()},' + fields
            case several:
                return f'{{"embeddings":[{",".join(stored.encode() for stored in several)}],' + fields

    @classmethod
    def decode(cls, text: str) -> RecordBody | None:
        """The record a file holds, or None for a file that is not one exactly (another shape, a
        time that is not one, a vector that is not base64, two of one model, not canonical): files
        written through the file tools, say, are skipped, never served as records. A cold start
        decodes every record of the memory, so this costs a JSON parse and a few C calls
        (pydantic's validation took four times as long)."""
        try:
            value = json.loads(text)
        except (ValueError, RecursionError):
            return None
        if type(value) is not dict or not _REQUIRED <= value.keys() <= _ALL:
            return None
        said, updated = value["text"], value["updated_at"]
        if type(said) is not str or type(updated) is not str or not _real_time(updated):
            return None
        stored = [value["embedding"]] if "embedding" in value else value.get("embeddings", [])
        if type(stored) is not list or len(stored) > MAX_VECTORS or not all(map(_embedding, stored)):
            return None
        embeddings = tuple(
            Embedding(one["model"], one["vector"], one.get("dimensions"), one.get("reason", "")) for one in stored
        )
        if len({(one.model, one.size) for one in embeddings}) < len(embeddings):
            return None
        body = cls(said, updated, embeddings)
        return body if body.encode() == text else None


def _real_time(text: str) -> bool:
    """Whether `text` is a time as commits record it (`wire_values.time_text`), of a day the calendar has."""
    if not _TIME.fullmatch(text):
        return False
    try:
        datetime.fromisoformat(text)
    except ValueError:
        return False
    return True


def _embedding(stored: object) -> bool:
    """Whether a stored embedding has a model name and a vector in base64's alphabet (its bytes are
    checked when it is used: one that does not decode is missing, not a reason to skip the record),
    or is a mark (an empty vector) with its space's dimensions and its reason, or without both."""
    if type(stored) is not dict:
        return False
    if stored.keys() == _MARK:
        dimensions = stored["dimensions"]
        if type(dimensions) is not int or dimensions < 1 or type(stored["reason"]) is not str or stored["vector"]:
            return False
    elif stored.keys() != _VECTOR:
        return False
    model, vector = stored["model"], stored["vector"]
    return type(model) is str and bool(model) and type(vector) is str and _BASE64.fullmatch(vector) is not None


def record_id(path: str) -> str | None:
    """The id of the record a file of the memory would hold, from its path (None: not a record's path)."""
    found = path.removesuffix(SUFFIX)
    return found if path.endswith(SUFFIX) and ID_PATTERN.fullmatch(found) else None


def packed(vector: numpy.ndarray) -> str:
    """A vector as stored: base64 of its values as little-endian float16."""
    return base64.b64encode(vector.astype("<f2").tobytes()).decode()


def unpacked(text: str) -> bytes | None:
    """A stored vector's float16 bytes, or None when they cannot be one (any length, any value)."""
    try:
        data = base64.b64decode(text, validate=True)
    except (ValueError, binascii.Error):
        return None
    return data if data and not len(data) % 2 else None
