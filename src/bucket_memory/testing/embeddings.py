"""An offline embedding model for tests and demos: words hashed into a fixed number of dimensions.

Texts that share words get similar vectors, so ranking by meaning can be checked without a
provider; it knows nothing of synonyms. It counts the texts it embedded, so tests can tell a
search that reused stored vectors from one that embedded records again.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence

from pydantic_ai.embeddings import EmbeddingModel, EmbeddingResult, EmbeddingSettings
from pydantic_ai.embeddings.result import EmbedInputType

_WORD = re.compile(r"\w+")


class HashingEmbeddingModel(EmbeddingModel):
    """Bag-of-words vectors of `dimensions` values; `name` is the model name results report."""

    def __init__(self, name: str = "hashing-v1", dimensions: int = 64) -> None:
        super().__init__()
        self._name = name
        self.dimensions = dimensions
        self.embedded: list[str] = []

    @property
    def model_name(self) -> str:
        return self._name

    @property
    def system(self) -> str:
        return "test"

    async def embed(
        self, inputs: str | Sequence[str], *, input_type: EmbedInputType, settings: EmbeddingSettings | None = None
    ) -> EmbeddingResult:
        texts, _ = self.prepare_embed(inputs, settings)
        self.embedded.extend(texts)
        return EmbeddingResult(
            embeddings=[self._vector(text) for text in texts],
            inputs=texts,
            input_type=input_type,
            model_name=self._name,
            provider_name=self.system,
        )

    def _vector(self, text: str) -> list[float]:
        vector = [0.0] * self.dimensions
        for word in _WORD.findall(text.lower()):
            digest = hashlib.sha256(f"{self._name}:{word}".encode()).digest()
            vector[int.from_bytes(digest[:4], "big") % self.dimensions] += 1.0
        return vector
