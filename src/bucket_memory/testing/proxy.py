"""A fault proxy on loopback in front of an emulator: HTTP requests pass, or meet one misbehaviour.

Each request is read whole from the client and, by the proxy's `plan` (given the request's
number, method and path), passed to the upstream server on a fresh connection, or met with a
fault: `never_answers` (reads and holds the connection), `drips` (a reply that sends one byte a
second), `cut_body` (passes the request, then sends the reply's headers and half its body),
`lose_reply` (passes the request, then closes without a reply: the request landed, its answer
lost), or an HTTP status such as 408, 429 or 503 sent without reaching the upstream.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Literal
from urllib.parse import urlsplit

type Fault = Literal["never_answers", "drips", "cut_body", "lose_reply"] | int
type Plan = Callable[[int, str, str], Fault | None]

_REASONS = {408: "Request Timeout", 429: "Too Many Requests", 500: "Internal Server Error", 503: "Service Unavailable"}


@dataclass(slots=True)
class _HttpRequest:
    method: str
    path: str
    head: bytes
    body: bytes


@dataclass
class FaultProxy:
    """Counts requests and faults; `held` counts client connections a hanging fault still holds.
    Each request passed on waits `latency` seconds first, as a distant server's would."""

    upstream: str
    plan: Plan
    latency: float = 0.0
    requests: int = 0
    faults: list[tuple[int, str, str, Fault]] = field(default_factory=list)
    held: int = 0
    released: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def _upstream_address(self) -> tuple[str, int]:
        parts = urlsplit(self.upstream)
        return parts.hostname or "127.0.0.1", parts.port or 80

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while (request := await _read_request(reader)) is not None:
                number, self.requests = self.requests, self.requests + 1
                fault = self.plan(number, request.method, request.path)
                if fault is None:
                    if self.latency:
                        await asyncio.sleep(self.latency)
                    writer.write(await self._forward(request))
                    await writer.drain()
                    continue
                self.faults.append((number, request.method, request.path, fault))
                await self._misbehave(fault, request, reader, writer)
                return
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            return
        finally:
            writer.close()

    async def _misbehave(
        self, fault: Fault, request: _HttpRequest, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        if isinstance(fault, int):
            body = b"<Error><Code>Injected</Code><Message>injected by the fault proxy</Message></Error>"
            reason = _REASONS.get(fault, "Injected")
            writer.write(
                f"HTTP/1.1 {fault} {reason}\r\nContent-Type: application/xml\r\nContent-Length: {len(body)}\r\n"
                "Connection: close\r\n\r\n".encode()
                + body
            )
            await writer.drain()
        elif fault == "lose_reply":
            await self._forward(request)
        elif fault == "cut_body":
            reply = await self._forward(request)
            head, _, body = reply.partition(b"\r\n\r\n")
            writer.write(head + b"\r\n\r\n" + body[: len(body) // 2])
            await writer.drain()
        else:
            await self._hold(fault, reader, writer)

    async def _hold(self, fault: Fault, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Keep the connection busy until the client gives up and closes it."""
        self.held += 1
        self.released.clear()
        try:
            if fault == "drips":
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 1000000\r\n\r\n")
            while True:
                if fault == "drips":
                    writer.write(b" ")
                    await writer.drain()
                try:
                    if not await asyncio.wait_for(reader.read(1024), timeout=1.0):
                        return  # the client closed its end
                except TimeoutError:
                    continue
        finally:
            self.held -= 1
            if self.held == 0:
                self.released.set()

    async def _forward(self, request: _HttpRequest) -> bytes:
        """The upstream's whole reply to the request, sent on a connection of its own."""
        host, port = self._upstream_address
        upstream_reader, upstream_writer = await asyncio.open_connection(host, port)
        try:
            upstream_writer.write(request.head + request.body)
            await upstream_writer.drain()
            return await upstream_reader.read()
        finally:
            upstream_writer.close()
            with contextlib.suppress(ConnectionError):
                await upstream_writer.wait_closed()


async def _read_request(reader: asyncio.StreamReader) -> _HttpRequest | None:
    """One request with its body, rewritten to close the upstream connection after its reply."""
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError:
        return None
    request_line, *header_lines = head.decode("latin-1").split("\r\n")
    method, path, _ = request_line.split(" ", 2)
    headers = [line for line in header_lines if line and not line.lower().startswith(("connection:", "keep-alive:"))]
    lengths = [line.split(":", 1)[1].strip() for line in headers if line.lower().startswith("content-length:")]
    if any(line.lower().startswith("transfer-encoding:") for line in headers):
        raise ConnectionError("the fault proxy reads requests with a Content-Length only")
    body = await reader.readexactly(int(lengths[0])) if lengths else b""
    rewritten = "\r\n".join([request_line, *headers, "Connection: close", "", ""]).encode("latin-1")
    return _HttpRequest(method, path, rewritten, body)


@asynccontextmanager
async def fault_proxy(upstream: str, plan: Plan, *, latency: float = 0.0) -> AsyncIterator[tuple[str, FaultProxy]]:
    """A proxy on 127.0.0.1 in front of `upstream`; yields its URL and the proxy."""
    proxy = FaultProxy(upstream, plan, latency)
    server = await asyncio.start_server(proxy.serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}", proxy
    finally:
        server.close()
        server.close_clients()  # a connection still held would keep wait_closed waiting
        await server.wait_closed()
