"""Bounded in time: an endpoint that accepts and never answers, or drips its reply a byte at a time,
ends every S3 request at its deadline with a store error, and leaves no connection open."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest
from a13n_harness.providers.memory import MemoryStoreError, Origin

from bucket_memory import LogFileStore, LogOptions
from bucket_memory.s3 import S3ObjectStore

type Behaviour = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


async def never_answers(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    await reader.read()  # until the client gives up and closes


async def drips(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    await reader.readuntil(b"\r\n\r\n")
    writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 1000000\r\n\r\n")
    while True:  # a byte a second, until the client closes
        writer.write(b"x")
        await writer.drain()
        try:
            if not await asyncio.wait_for(reader.read(1), timeout=1.0):
                return
        except TimeoutError:
            continue


class Endpoint:
    """A loopback HTTP endpoint with one misbehaviour; counts connections still open."""

    def __init__(self, behaviour: Behaviour) -> None:
        self.behaviour = behaviour
        self.open = 0
        self.closed = asyncio.Event()

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.open += 1
        self.closed.clear()
        try:
            await self.behaviour(reader, writer)
        except (ConnectionError, TimeoutError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()
            self.open -= 1
            if self.open == 0:
                self.closed.set()


@pytest.fixture(params=[never_answers, drips], ids=["never-answers", "drips"])
async def endpoint(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Endpoint]:
    misbehaving = Endpoint(request.param)
    server = await asyncio.start_server(misbehaving.serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{port}")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    async with server:
        yield misbehaving


@pytest.mark.timeout(60)
async def test_every_s3_request_ends_at_its_deadline(endpoint: Endpoint) -> None:
    objects = S3ObjectStore(bucket="bucket", prefix="memory", request_timeout=0.5)
    store = LogFileStore(objects, options=LogOptions(request_attempts=2))
    try:
        for operation in (
            store.list(),
            store.write("a.md", "a", expected=None, origin=Origin(run_id="deadline")),
        ):
            with pytest.raises(MemoryStoreError) as caught:
                await operation
            assert caught.value.code in ("unavailable", "write_unconfirmed")
        # Every connection the endpoint accepted was closed by the client that gave up.
        await endpoint.closed.wait()
        assert endpoint.open == 0
    finally:
        await objects.aclose()
