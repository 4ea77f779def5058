"""OpenTelemetry spans and metrics for store operations, through the API the harness depends on.

Each store operation runs in a span `bucket_memory.<operation>` whose attributes count the
requests it sent, the retries, the commits lost to other writers (conflicts), the bytes read
and committed, the writes it published as intents and the others' intents its commits settled;
a commit that other callers' writes joined counts for each of them. The same events feed
counters, and each operation's duration a histogram, by operation and outcome.
Nothing is recorded unless the host installs an OpenTelemetry SDK: the API's default providers
do nothing, so unused telemetry costs a context variable and a few additions per operation.
Telemetry never changes an operation's outcome: the SDK does not guard the span processors a host
adds, so every call into it is guarded here (a raising processor once failed every operation,
a write that had landed included), and a failure is logged instead.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Coroutine, Iterator
from contextlib import AbstractAsyncContextManager, AbstractContextManager, contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, fields
from functools import wraps
from importlib.metadata import version
from typing import Any, Concatenate, Protocol

from a13n_harness.providers.memory import MemoryStoreError
from opentelemetry import metrics, trace
from opentelemetry.trace import Span, Status, StatusCode

logger = logging.getLogger(__name__)

_SCOPE = "bucket_memory"
_tracer = trace.get_tracer(_SCOPE, version("bucket-memory"))
_meter = metrics.get_meter(_SCOPE, version("bucket-memory"))
_duration = _meter.create_histogram(
    "bucket_memory.operation.duration", unit="s", description="How long each store operation took."
)


@dataclass(slots=True)
class Tally:
    """What one operation (or one commit, for the callers it serves) has cost so far."""

    requests: int = 0
    retries: int = 0
    conflicts: int = 0
    commits: int = 0
    bytes_read: int = 0
    bytes_written: int = 0
    intents: int = 0
    folded: int = 0
    embeddings_refused: int = 0
    searched_by_words: int = 0

    def add(self, other: Tally) -> None:
        for name in _EVENTS:
            setattr(self, name, getattr(self, name) + getattr(other, name))

    def attributes(self) -> dict[str, int]:
        return {f"bucket_memory.{name}": getattr(self, name) for name in _EVENTS}


_EVENTS = tuple(field.name for field in fields(Tally))


_COUNTERS = {
    "requests": _meter.create_counter("bucket_memory.requests", unit="{request}", description="Requests sent."),
    "retries": _meter.create_counter("bucket_memory.retries", unit="{retry}", description="Requests sent again."),
    "conflicts": _meter.create_counter(
        "bucket_memory.conflicts", unit="{conflict}", description="Commits lost to another writer's, then retried."
    ),
    "commits": _meter.create_counter("bucket_memory.commits", unit="{commit}", description="Commits that landed."),
    "bytes_read": _meter.create_counter("bucket_memory.bytes_read", unit="By", description="Object bytes read."),
    "bytes_written": _meter.create_counter(
        "bucket_memory.bytes_written", unit="By", description="Commit bytes sent, every attempt."
    ),
    "intents": _meter.create_counter(
        "bucket_memory.intents", unit="{intent}", description="Writes published as intents for another to commit."
    ),
    "folded": _meter.create_counter(
        "bucket_memory.folded", unit="{intent}", description="Other processes' intents settled by our commits."
    ),
    "embeddings_refused": _meter.create_counter(
        "bucket_memory.embeddings_refused",
        unit="{record}",
        description="Record texts an embedder refused alone, searched by words until asked again.",
    ),
    "searched_by_words": _meter.create_counter(
        "bucket_memory.searched_by_words",
        unit="{record}",
        description="Records a hybrid search ranked by words alone: its embedder failed on the query or the call.",
    ),
}
_cold_starts = _meter.create_counter(
    "bucket_memory.cold_starts", unit="{load}", description="Memories loaded whole from a checkpoint and the log."
)
_current: ContextVar[Tally | None] = ContextVar("bucket_memory_tally", default=None)


def _guarded(record: Callable[[], object]) -> None:
    """Call into the SDK; a failure there is logged, never raised into the operation."""
    try:
        record()
    except Exception:
        logger.warning("OpenTelemetry failed to record; the operation goes on", exc_info=True)


def count(event: str, amount: int = 1) -> None:
    """Record `amount` of an event (a `Tally` field name) for the metrics and the current operation."""
    _guarded(lambda: _COUNTERS[event].add(amount))
    tally = _current.get()
    if tally is not None:
        setattr(tally, event, getattr(tally, event) + amount)


def count_cold_start() -> None:
    _guarded(lambda: _cold_starts.add(1))


def current() -> Tally | None:
    """The tally of the operation running now, if any (for work done on its behalf elsewhere)."""
    return _current.get()


@contextmanager
def tallied() -> Iterator[Tally]:
    """Count what the body sends in a tally of its own, apart from the operation around it."""
    tally = Tally()
    token = _current.set(tally)
    try:
        yield tally
    finally:
        _current.reset(token)


def operation(name: str, memory: str) -> AbstractAsyncContextManager[Tally]:
    """The span, tally and duration of one store operation on the memory at `memory`; what it
    cost counts for an operation it runs inside as well (a caller's own around a store's)."""
    return _Operation(name, memory)


class _Operation:
    """One operation's span, tally and duration, entered around its body. A class, not a generator:
    it wraps every read, and a generator's machinery was a measurable part of a local one
    (docs/performance.md, "Numbers behind the code")."""

    __slots__ = ("_enclosing", "_memory", "_name", "_span", "_span_named", "_started", "_tally", "_token")

    def __init__(self, name: str, memory: str) -> None:
        self._name, self._memory = name, memory
        self._span_named: AbstractContextManager[Span] | None = None
        self._span: Span | None = None

    async def __aenter__(self) -> Tally:
        self._started = time.perf_counter()
        self._enclosing = _current.get()
        # Without an SDK the span would be a no-op that still costs more than the rest together.
        if not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider):
            try:
                self._span_named = _tracer.start_as_current_span(
                    f"bucket_memory.{self._name}",
                    attributes={"bucket_memory.memory": self._memory},
                    record_exception=False,  # a store error's message is for its caller; the code says enough
                    set_status_on_exception=False,
                )
                self._span = self._span_named.__enter__()
            except Exception:
                self._span_named = None
                logger.warning("OpenTelemetry failed to start a span; the operation goes on", exc_info=True)
        self._tally = Tally()
        self._token = _current.set(self._tally)
        return self._tally

    async def __aexit__(self, kind: type[BaseException] | None, error: BaseException | None, _: object) -> None:
        outcome = "ok" if error is None else error.code if isinstance(error, MemoryStoreError) else type(error).__name__
        span, tally = self._span, self._tally
        try:
            if span is not None:
                _guarded(lambda: _close(span, tally, outcome))
            if self._enclosing is not None:
                self._enclosing.add(tally)
            elapsed = time.perf_counter() - self._started
            labels = {"bucket_memory.operation": self._name, "bucket_memory.outcome": outcome}
            _guarded(lambda: _duration.record(elapsed, labels))
        finally:
            _current.reset(self._token)
            if (span_named := self._span_named) is not None:
                _guarded(lambda: span_named.__exit__(None, None, None))


def _close(span: Span, tally: Tally, outcome: str) -> None:
    span.set_attributes(tally.attributes())
    if outcome != "ok":
        span.set_attribute("error.type", outcome)
        span.set_status(Status(StatusCode.ERROR, outcome))


class _Located(Protocol):
    @property
    def location(self) -> str: ...


type _Method[S, **P, R] = Callable[Concatenate[S, P], Coroutine[Any, Any, R]]


def traced[S: _Located, **P, R](name: str) -> Callable[[_Method[S, P, R]], _Method[S, P, R]]:
    """Run a store method as the operation `name`, on its store's memory."""

    def decorate(method: _Method[S, P, R]) -> _Method[S, P, R]:
        @wraps(method)
        async def run(store: S, /, *args: P.args, **kwargs: P.kwargs) -> R:
            async with operation(name, store.location):
                return await method(store, *args, **kwargs)

        return run

    return decorate
