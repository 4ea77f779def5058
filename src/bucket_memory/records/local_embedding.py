"""An embedder that runs in this process, offline: WordLlama's 256-dimension model, whose weights
ship inside its wheel (the `local-embeddings` extra), so a Lambda image needs no key, no network
and no model server.

It is a small model (static token embeddings, averaged): on the labelled set of `make bench` it
ranks below BM25 alone and helps only fused with it (docs/performance.md, "Recall"). Its space is
stored like any provider's, as "local:wordllama-l2-supercat-256".
"""

from __future__ import annotations

import asyncio
import functools
import importlib
import logging
import shutil
import tempfile
import threading
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

from pydantic_ai.embeddings import EmbeddingModel, EmbeddingResult, EmbeddingSettings
from pydantic_ai.embeddings.result import EmbedInputType

from ..runtime.installing import install_hint

if TYPE_CHECKING:
    import numpy
    from pydantic_ai import Embedder
    from wordllama import WordLlamaInference

LOCAL = "local"  # the embedder name `open_record_store` and `--embedder` take for this model
INSTALL = install_hint("local-embeddings")
_CONFIG, _DIMENSIONS = "l2_supercat", 256
_LOCK = threading.Lock()


class LocalEmbeddingModel(EmbeddingModel):
    """WordLlama (l2_supercat, 256 dimensions) in this process: loaded once per process on first
    use, each call run in a worker thread so that the event loop never waits on it."""

    def __init__(self) -> None:
        super().__init__()

    @property
    def model_name(self) -> str:
        return f"wordllama-{_CONFIG.replace('_', '-')}-{_DIMENSIONS}"

    @property
    def system(self) -> str:
        return LOCAL

    async def embed(
        self, inputs: str | Sequence[str], *, input_type: EmbedInputType, settings: EmbeddingSettings | None = None
    ) -> EmbeddingResult:
        texts, _ = self.prepare_embed(inputs, settings)
        vectors = await asyncio.to_thread(embedded, list(texts))
        return EmbeddingResult(
            embeddings=vectors.tolist(),
            inputs=texts,
            input_type=input_type,
            model_name=self.model_name,
            provider_name=self.system,
        )


def local_embedder() -> Embedder:
    """The local model as pydantic-ai's `Embedder`; an ImportError naming the extra when it is missing."""
    from pydantic_ai import Embedder

    try:
        _wordllama()  # checked now: a missing extra is the caller's usage error
    except ImportError as error:
        raise ImportError(f"The local embedder needs wordllama, which this installation lacks: {INSTALL}") from error
    return Embedder(LocalEmbeddingModel())


def embedded(texts: list[str]) -> numpy.ndarray:
    """The texts' vectors (float32 rows, not normalized), in the calling thread."""
    import numpy

    model = _model()
    with _LOCK:  # one model, shared by every store of the process; its tokenizer is not known to be thread-safe
        return numpy.asarray(model.embed(texts), dtype=numpy.float32)


@functools.cache
def _model() -> WordLlamaInference:
    wordllama = _wordllama()
    # wordllama 0.4.0 looks for its tokenizer under tokenizer/ but ships it under tokenizers/, and
    # would download it: a cache directory holding a copy where it looks keeps it offline. It is
    # read while loading only, so it is removed then (it was left behind, one a process).
    shipped = Path(str(wordllama.__file__)).parent / "tokenizers" / f"{_CONFIG}_tokenizer_config.json"
    cache = Path(tempfile.mkdtemp(prefix="bucket-memory-wordllama-"))
    try:
        (cache / "tokenizers").mkdir()
        shutil.copy(shipped, cache / "tokenizers")
        model: WordLlamaInference = wordllama.WordLlama.load(
            _CONFIG, cache_dir=cache, dim=_DIMENSIONS, disable_download=True
        )
        return model
    finally:
        shutil.rmtree(cache, ignore_errors=True)


def _wordllama() -> ModuleType:
    """The wordllama package, imported without the INFO logging it turns on for the whole process
    (its modules call `logging.basicConfig` on import): the host's root logger is left as it was."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    try:
        wordllama = importlib.import_module("wordllama")
    finally:
        for added in [handler for handler in root.handlers if handler not in handlers]:
            root.removeHandler(added)
        root.setLevel(level)
    return wordllama
