"""A record's file: its path (`<32 hex digits>.json`) and its text, the canonical JSON of a `RecordBody`.

Reading is hostile: a file that does not decode to a record exactly (another name, other fields,
not canonical) is not a record, and a stored vector that is not one (bad base64, an odd byte
count, a value that is not finite) reads as missing, never as an error.
"""

from __future__ import annotations

import base64
import binascii
import re
from typing import TYPE_CHECKING, Annotated

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .codec import Time, canonical

if TYPE_CHECKING:
    import numpy

ID_PATTERN = re.compile(r"[0-9a-f]{32}")
SUFFIX = ".json"


class Embedding(BaseModel):
    """A record's vector: the embedding model that made it (as "provider:model") and its values as
    base64 of little-endian float16 (2 bytes a dimension: 10,000 records of 1,536 dimensions take 40
    MB). Neither has a length limit of its own: the file's (`FileFormat.max_file_bytes`) bounds both."""

    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)
    model: Annotated[str, Field(min_length=1)]
    vector: Annotated[str, Field(pattern=r"^[A-Za-z0-9+/]*={0,2}$")]


class RecordBody(BaseModel):
    """What a record's file holds: its text, when it was written, and its vector when an embedder made one."""

    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)
    text: str
    updated_at: Time
    embedding: Embedding | None = None

    def encode(self) -> str:
        return canonical(self.model_dump(mode="json", exclude_none=True)).decode()

    @classmethod
    def decode(cls, text: str) -> RecordBody | None:
        """The record a file holds, or None for a file that is not one (written through the file
        tools, say): such files are skipped, never served as records."""
        try:
            body = cls.model_validate_json(text)
        except ValidationError:
            return None
        return body if body.encode() == text else None


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
