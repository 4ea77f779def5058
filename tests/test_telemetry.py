"""OpenTelemetry: each store operation's span and the metrics, read back with the SDK's in-memory
exporters and checked against the requests a counting object store saw."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from a13n_harness.providers.memory import MemoryStoreError, Origin
from opentelemetry import metrics, trace
from opentelemetry.context import Context
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader, NumberDataPoint
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from bucket_memory import LogFileStore, LogOptions
from bucket_memory.objects.memory import MemoryObjectStore
from bucket_memory.records.store import LogRecordStore
from bucket_memory.runtime import telemetry
from bucket_memory.testing.faults import Faults, FaultyObjectStore

ORIGIN = Origin(run_id="telemetry")


class Exported:
    """The spans and metrics the SDK recorded, installed once per process (the API allows one provider)."""

    def __init__(self) -> None:
        self.spans = InMemorySpanExporter()
        self.reader = InMemoryMetricReader()
        tracer_provider = TracerProvider()
        tracer_provider.add_span_processor(SimpleSpanProcessor(self.spans))
        self.raising = Raising()
        tracer_provider.add_span_processor(self.raising)
        trace.set_tracer_provider(tracer_provider)
        metrics.set_meter_provider(MeterProvider(metric_readers=[self.reader]))

    def finished(self, name: str) -> list[ReadableSpan]:
        return [span for span in self.spans.get_finished_spans() if span.name == name]

    def metric(self, name: str, **attributes: str) -> float:
        """A counter's total, or a histogram's count, over the data points with these attributes."""
        data = self.reader.get_metrics_data()
        total = 0.0
        for resource in data.resource_metrics if data else ():
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    if metric.name != name:
                        continue
                    for point in metric.data.data_points:
                        if attributes.items() <= dict(point.attributes or {}).items():
                            # A counter's point has a value; a histogram's, a count.
                            total += point.value if isinstance(point, NumberDataPoint) else point.count
        return total


class Raising(SpanProcessor):
    """A host's span processor that raises when `on` (the SDK does not guard processors)."""

    def __init__(self) -> None:
        self.on = False

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        if self.on:
            raise RuntimeError("a processor failed on start")

    def on_end(self, span: ReadableSpan) -> None:
        if self.on:
            raise RuntimeError("a processor failed on end")


_exported: Exported | None = None


@pytest.fixture
def exported() -> Exported:
    global _exported
    _exported = _exported or Exported()
    _exported.spans.clear()
    return _exported


def attributes(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


async def test_a_write_span_counts_what_the_store_sent(exported: Exported) -> None:
    objects = FaultyObjectStore(MemoryObjectStore())
    store = LogFileStore(objects)
    await store.list()
    before, sent = objects.requests, objects.bytes_sent
    commits = exported.metric("bucket_memory.commits")
    await store.write("plan.md", "ship\n", expected=None, origin=ORIGIN)
    (span,) = exported.finished("bucket_memory.write")
    seen = attributes(span)
    assert seen["bucket_memory.memory"] == store.location
    assert seen["bucket_memory.requests"] == objects.requests - before
    assert seen["bucket_memory.bytes_written"] == objects.bytes_sent - sent
    assert seen["bucket_memory.commits"] == 1 and seen["bucket_memory.conflicts"] == 0
    assert span.status.status_code is not StatusCode.ERROR
    assert exported.metric("bucket_memory.commits") == commits + 1
    (listed,) = exported.finished("bucket_memory.list")
    assert attributes(listed)["bucket_memory.requests"] >= 1, "the first list loads the memory"


async def test_a_lost_commit_is_a_conflict(exported: Exported) -> None:
    objects = MemoryObjectStore()
    stale = LogFileStore(objects, options=LogOptions(max_staleness=3600))
    await stale.list()
    await LogFileStore(objects).write("a.md", "first\n", expected=None, origin=ORIGIN)
    conflicts = exported.metric("bucket_memory.conflicts")
    await stale.write("b.md", "second\n", expected=None, origin=ORIGIN)
    (_, span) = exported.finished("bucket_memory.write")
    assert attributes(span)["bucket_memory.conflicts"] == 1 and attributes(span)["bucket_memory.commits"] == 1
    assert exported.metric("bucket_memory.conflicts") == conflicts + 1


async def test_retries_are_counted(exported: Exported) -> None:
    def script(operation: str, key: str, before: int) -> Any:
        return "refuse" if operation == "get" and before == 0 else None

    writer = LogFileStore(MemoryObjectStore())
    await writer.write("a.md", "x\n", expected=None, origin=ORIGIN)
    reader = LogFileStore(FaultyObjectStore(writer.objects, Faults(script=script)))
    retries = exported.metric("bucket_memory.retries")
    assert (await reader.read("a.md")).text == "x\n"
    (span,) = exported.finished("bucket_memory.read")
    assert attributes(span)["bucket_memory.retries"] == 1
    assert attributes(span)["bucket_memory.bytes_read"] > 0
    assert exported.metric("bucket_memory.retries") == retries + 1


async def test_a_failed_operation_has_an_error_status_and_outcome(exported: Exported) -> None:
    store = LogFileStore(MemoryObjectStore())
    missing = exported.metric("bucket_memory.operation.duration", **{"bucket_memory.outcome": "not_found"})
    with pytest.raises(MemoryStoreError):
        await store.read("absent.md")
    (span,) = exported.finished("bucket_memory.read")
    assert span.status.status_code is StatusCode.ERROR and attributes(span)["error.type"] == "not_found"
    assert not span.events, "no exception event: its message is for the caller, not the trace"
    after = exported.metric("bucket_memory.operation.duration", **{"bucket_memory.outcome": "not_found"})
    assert after == missing + 1


async def test_batched_writes_each_carry_the_commit_they_shared(exported: Exported) -> None:
    store = LogFileStore(MemoryObjectStore())
    await store.list()
    await asyncio.gather(*(store.write(f"{n}.md", "x\n", expected=None, origin=ORIGIN) for n in range(3)))
    spans = exported.finished("bucket_memory.write")
    assert len(spans) == 3
    commits = [attributes(span)["bucket_memory.commits"] for span in spans]
    assert sum(commits) >= 3 - 1, "at least two writes shared one commit"
    assert all(count >= 1 for count in commits), "each write waited on a commit that landed"


async def test_cold_starts_checkpoints_and_records_are_seen(exported: Exported) -> None:
    objects = MemoryObjectStore()
    cold = exported.metric("bucket_memory.cold_starts")
    records = LogRecordStore(LogFileStore(objects))
    added = await records.add("the build runs on friday")
    assert [record.id for record in await records.search("build", limit=3)] == [added.id]
    assert exported.metric("bucket_memory.cold_starts") == cold + 1
    assert exported.finished("bucket_memory.records.add") and exported.finished("bucket_memory.records.search")
    store = LogFileStore(MemoryObjectStore())
    version = None
    for n in range(40):
        version = await store.write("log.md", f"{n}\n", expected=version, origin=ORIGIN)
    await store.settle()
    (checkpoint, *_) = exported.finished("bucket_memory.checkpoint")
    assert (
        attributes(checkpoint)["bucket_memory.requests"] >= 1 and attributes(checkpoint)["bucket_memory.bytes_written"]
    )
    writes = exported.finished("bucket_memory.write")
    assert checkpoint.parent is not None and checkpoint.parent.span_id in {span.context.span_id for span in writes}, (
        "a checkpoint is a child of the write whose commit made it due"
    )
    await records.purge()
    (purged,) = exported.finished("bucket_memory.records.purge")
    assert attributes(purged)["bucket_memory.commits"] == 1
    async with telemetry.operation("outer", store.location):  # an operation run inside another: both count it
        await store.write("log.md", "last\n", expected=version, origin=ORIGIN)
    (outer,) = exported.finished("bucket_memory.outer")
    inner = exported.finished("bucket_memory.write")[-1]
    assert attributes(outer)["bucket_memory.commits"] == attributes(inner)["bucket_memory.commits"] == 1


async def test_a_raising_span_processor_or_metric_never_fails_an_operation(
    exported: Exported, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A write whose commit landed must be acknowledged whatever telemetry does after it."""
    from bucket_memory.runtime import telemetry

    def broken(*_: object, **__: object) -> None:
        raise RuntimeError("a metric reader failed")

    objects = MemoryObjectStore()
    store = LogFileStore(objects)
    exported.raising.on = True
    monkeypatch.setattr(telemetry._duration, "record", broken)
    monkeypatch.setattr(telemetry._COUNTERS["commits"], "add", broken)
    try:
        assert await store.write("plan.md", "ship\n", expected=None, origin=ORIGIN) == "1"
        assert (await store.read("plan.md")).text == "ship\n"
        with pytest.raises(MemoryStoreError) as refused:
            await store.write("plan.md", "x", expected=None, origin=ORIGIN)
        assert refused.value.code == "version_mismatch"  # the operation's own outcome, unchanged
    finally:
        exported.raising.on = False
    assert (await LogFileStore(objects).read("plan.md")).version == "1"
