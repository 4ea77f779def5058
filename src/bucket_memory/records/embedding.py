"""Calls to an embedder: bounded by the operation's deadline, in batches, every failure mapped.

An embedder (pydantic-ai's `Embedder`) is a third party that may fail, hang, ignore cancellation
or answer with anything. Each call here ends by the current operation's deadline (`deadline.py`)
whatever the provider does, any exception it raises becomes `unavailable` naming the provider's
error, and its answer is checked: one finite vector per text, all of one length. Vectors come
back as unit float32 rows, with the space they belong to.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import AsyncIterator, Awaitable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from a13n_harness.providers.memory import MemoryStoreError

from ..runtime import deadline

if TYPE_CHECKING:
    import numpy
    from pydantic_ai import Embedder
    from pydantic_ai.embeddings import EmbeddingResult

logger = logging.getLogger(__name__)

# The inputs per call: within what OpenAI (2,048), Cohere (96) and Gemini (100) accept.
DEFAULT_BATCH = 96
_ERROR_CHARS = 300


# HTTP statuses with which a provider refuses the inputs themselves (too long, malformed), not the
# call: a batch refused so is split to find the text (`recall`); a 429, a 5xx or a 401 never is.
_REFUSALS = frozenset({400, 413, 422})
# Exceptions that say the call failed, not its texts, by any class in their lineage: the standard
# library's, and the names SDKs give theirs (httpx's TransportError, openai's APIConnectionError,
# RateLimitError, AuthenticationError...). Anything else a model raises is taken as the texts' failure.
_CALL_FAILURES = re.compile(r"Timeout|Connect|Transport|Network|RateLimit|Unavailable|Overload|Auth|Permission|Quota")


class TextsRefused(MemoryStoreError):
    """The embedder failed on a call's texts (`unavailable`), not on the call: one of them may be
    one it fails on alone. `reason` is what it raised."""

    def __init__(self, message: str, reason: str) -> None:
        super().__init__("unavailable", message)
        self.reason = reason


@dataclass(frozen=True, slots=True)
class Space:
    """Where vectors can be compared: one embedding model (as "provider:model", the way its
    provider names it in its answers) and one number of dimensions."""

    model: str
    dimensions: int


@dataclass(frozen=True, slots=True)
class Vectors:
    """An embedder's answer for some texts: their space and one unit float32 row per text (a row of
    zeros for a zero vector, which is then similar to nothing)."""

    space: Space
    rows: numpy.ndarray


def check_batch(value: object) -> int:
    """`value` as a number of texts per embedding call, or a ValueError naming the setting."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"embed_batch must be a whole number of at least 1, not {value!r}")
    return value


async def embed_query(embedder: Embedder, query: str) -> Vectors:
    return await _embedded(embedder, [query], "query")


async def embed_documents(embedder: Embedder, texts: Sequence[str], *, batch: int) -> AsyncIterator[Vectors]:
    """The texts' vectors, one call per `batch` texts in order; a call that fails ends the iteration
    with `unavailable`, after the batches before it were yielded (a caller keeps what it got)."""
    for start in range(0, len(texts), batch):
        yield await _embedded(embedder, texts[start : start + batch], "document")


async def _embedded(embedder: Embedder, texts: Sequence[str], kind: Literal["query", "document"]) -> Vectors:
    name = model_name(embedder)
    call = embedder.embed_query(list(texts)) if kind == "query" else embedder.embed_documents(list(texts))
    try:
        result = await _bounded(call, f"The embedder {name}")
    except deadline.DeadlineExceeded:
        raise
    except Exception as error:  # a provider's own errors: none of them is the caller's to handle
        reason = f"{type(error).__name__}: {str(error)[:_ERROR_CHARS]}"
        message = f"The embedder {name} failed ({reason}); check its model name, credentials and quota, then try again."
        if _of_the_texts(error):
            raise TextsRefused(message, reason) from None
        raise MemoryStoreError("unavailable", message) from None
    return _checked(result, len(texts), name)


def _of_the_texts(error: Exception) -> bool:
    """Whether an embedder's exception is about the texts it was given (a provider's 400, 413 or
    422; any exception of a local model or SDK), not about the call (a status of another kind, a
    timeout, a connection, a rate limit, credentials: `_CALL_FAILURES`)."""
    status = getattr(error, "status_code", None)
    if isinstance(status, int) and not isinstance(status, bool):
        return status in _REFUSALS
    if isinstance(error, TimeoutError | ConnectionError | MemoryError):
        return False
    return not any(_CALL_FAILURES.search(kind.__name__) for kind in type(error).__mro__)


async def _bounded(call: Awaitable[EmbeddingResult], what: str) -> EmbeddingResult:
    """The call's result, or `unavailable` at the operation's deadline. The call runs as a task of
    its own, so that one that swallows its cancellation still cannot hold the caller past the end."""
    task = asyncio.ensure_future(call)
    try:
        done, _ = await asyncio.wait({task}, timeout=deadline.remaining())
    except asyncio.CancelledError:
        task.cancel()
        task.add_done_callback(_consume)
        raise
    if not done:
        task.cancel()
        task.add_done_callback(_consume)
        raise deadline.DeadlineExceeded(what)
    return task.result()


def _consume(task: asyncio.Future[EmbeddingResult]) -> None:
    if not task.cancelled() and (error := task.exception()) is not None:
        logger.debug("an embedding call abandoned at its deadline failed later: %r", error)


def _checked(result: object, count: int, name: str) -> Vectors:
    """The vectors an answer holds, or `unavailable` when it is not one vector of finite numbers per text."""
    import numpy

    try:
        space = f"{result.provider_name}:{result.model_name}"  # type: ignore[attr-defined]
        values = numpy.asarray(result.embeddings, dtype=numpy.float64)  # type: ignore[attr-defined]
    except (AttributeError, TypeError, ValueError, OverflowError) as error:
        raise _unusable(name, f"not a list of vectors ({type(error).__name__}: {str(error)[:_ERROR_CHARS]})") from None
    if values.ndim != 2 or values.shape[0] != count or values.shape[1] == 0:
        raise _unusable(name, f"an array of shape {values.shape} for {count} texts")
    if not numpy.isfinite(values).all():
        raise _unusable(name, "values that are not finite numbers")
    norms = numpy.linalg.norm(values, axis=1, keepdims=True)
    rows = numpy.divide(values, norms, out=numpy.zeros_like(values), where=norms > 0).astype(numpy.float32)
    return Vectors(Space(space, int(values.shape[1])), rows)


def _unusable(name: str, what: str) -> MemoryStoreError:
    return MemoryStoreError("unavailable", f"The embedder {name} answered with {what}; check its model.")


def embedder_named(name: str) -> Embedder:
    """The embedder a name gives: "local" (`local_embedding`, in this process) or a provider's
    "provider:model" as pydantic-ai infers it. Its errors (ValueError, pydantic-ai's UserError, an
    ImportError naming a missing package) carry advice; callers show them."""
    from pydantic_ai import Embedder
    from pydantic_ai.embeddings import infer_embedding_model

    from .local_embedding import LOCAL, local_embedder

    if name == LOCAL:
        return local_embedder()
    try:
        return Embedder(infer_embedding_model(name))
    except Exception as inferred:
        made = _imported(name)
        if made is None:
            raise inferred from None
        return made


def _imported(name: str) -> Embedder | None:
    """The embedder "module:attribute" names (an `Embedder`, an `EmbeddingModel`, or a callable that
    makes one with no arguments), or None when `module` is no module this installation has."""
    import importlib
    import importlib.util

    from pydantic_ai import Embedder
    from pydantic_ai.embeddings import EmbeddingModel

    module_name, _, attribute = name.partition(":")
    try:
        # "provider:model-v2" names a provider's model; only an attribute path names one of ours.
        if (
            not all(part.isidentifier() for part in attribute.split("."))
            or importlib.util.find_spec(module_name) is None
        ):
            return None
    except (ImportError, ValueError):  # a parent package missing, or a name that is no module name
        return None
    found: object = importlib.import_module(module_name)
    for part in attribute.split("."):
        if not hasattr(found, part):
            raise ValueError(f"{module_name} has no {attribute[:100]!r}")
        found = getattr(found, part)
    if callable(found) and not isinstance(found, Embedder | EmbeddingModel):  # a class or a factory
        found = found()
    if isinstance(found, EmbeddingModel):
        return Embedder(found)
    if isinstance(found, Embedder):
        return found
    raise ValueError(f"{name[:100]} is a {type(found).__name__}, not an Embedder or an EmbeddingModel")


def model_name(embedder: Embedder) -> str:
    """The embedder's model as its user named it, for messages."""
    model = embedder.model
    if isinstance(model, str):
        return model[:200]
    try:
        return f"{model.system}:{model.model_name}"[:200]
    except Exception:  # a model that cannot name itself is still called; the message names its class
        return type(model).__name__
