"""The S3 clients every `S3ObjectStore` of a process shares: one per event loop and credentials."""

from __future__ import annotations

import asyncio
import functools
import hashlib
import os
import weakref
from collections.abc import AsyncIterator
from typing import Any

from aiobotocore.config import AioConfig
from aiobotocore.session import get_session
from botocore.exceptions import BotoCoreError, ProfileNotFound
from botocore.handlers import add_expect_header
from botocore.loaders import Loader, create_loader

from .s3_errors import s3_client_error

# The shared clients of each event loop, by the credentials (and endpoint) they were made with.
_SHARED: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, LoopClient]] = weakref.WeakKeyDictionary()


def shared_client(loop: asyncio.AbstractEventLoop) -> LoopClient:
    """The client every store on `loop` shares while the environment names the same credentials,
    endpoint and region (the AWS_* variables), held once more: the caller lets go with `release`.

    A client costs 1.5 MB and a pool of sockets; one per store made a process serving a thousand
    memories hold a thousand. Keyed by a digest of the variables, so no secret is kept twice.
    """
    settings = repr(sorted((name, value) for name, value in os.environ.items() if name.startswith("AWS_")))
    key = hashlib.sha256(settings.encode()).hexdigest()
    clients = _SHARED.setdefault(loop, {})
    held = clients.get(key)
    if held is None:
        held = clients[key] = LoopClient(clients, key)
    held.users += 1
    return held


class LoopClient:
    """An S3 client on one event loop, shared by the stores that hold it (`users`): made from the
    standard chain on first use, closed when the last of them lets go (`release`) or when the loop
    shuts down its async generators (`asyncio.run` does, at its end)."""

    def __init__(self, shared: dict[str, LoopClient], key: str) -> None:
        self.users = 0
        self._shared, self._key = shared, key
        self._holder: AsyncIterator[Any] | None = None
        self._made: asyncio.Future[Any] | None = None

    async def release(self) -> None:
        self.users -= 1
        if self.users <= 0:
            if self._shared.get(self._key) is self:
                del self._shared[self._key]  # the next store makes a new one: this one is closing
            await self.aclose()

    async def client(self, location: str) -> Any:
        if self._made is None or (self._made.done() and (self._made.cancelled() or self._made.exception())):
            self._holder = _held_client()
            self._made = asyncio.ensure_future(anext(self._holder))
        try:
            return await asyncio.shield(self._made)
        except (ProfileNotFound, BotoCoreError) as error:
            raise s3_client_error(error, location) from None

    async def aclose(self) -> None:
        if self._holder is not None:
            await self._holder.aclose()  # type: ignore[attr-defined]


async def _held_client() -> AsyncIterator[Any]:
    """An S3 client, open until this generator is closed."""
    # Timeouts stay far below half the grace period. The log retries (and settles ambiguous creates)
    # itself, so the SDK makes one attempt per request.
    # Replies are not checksummed by the SDK: every object carries a SHA-256 of its content that
    # decoding checks, and a CRC32 of a 32 MiB checkpoint on the event loop would stall it.
    config = AioConfig(
        connect_timeout=5,
        read_timeout=20,
        retries={"total_max_attempts": 1},
        response_checksum_validation="when_required",
    )
    session = get_session()
    session.register_component("data_loader", botocore_models())
    # botocore parses its JSON service models on first use, 50 ms or more of CPU: in a thread, not on the loop.
    await asyncio.to_thread(_load_models, session)
    async with session.create_client("s3", config=config) as client:
        # An upload that waits for "100 Continue" waits on a reply no timeout bounds; send at once.
        client.meta.events.unregister("before-call.s3", add_expect_header)
        _send_once(client)
        yield client


def _send_once(client: Any) -> None:
    """Make aiohttp send each request once. It sends an idempotent one (a PUT) again, unseen by
    botocore, when the connection drops before the reply: a refusal of that second send (a 403)
    would then be reported as `forbidden`, "nothing was written", for a write the first send made.
    Sent once, a lost reply is a transient error, which the log settles by reading the key.
    `_retry_connection` is aiohttp's own switch, set on the session aiobotocore makes on first use
    (`tests/test_objects.py` fails if either name moves)."""
    http = client._endpoint.http_session
    made = http._get_session

    async def session_sending_once(proxy_url: Any) -> Any:
        session = await made(proxy_url)
        session._retry_connection = False
        return session

    http._get_session = session_sending_once


@functools.cache
def botocore_models() -> Loader:
    """The one loader of botocore's data files for every AWS client in the process. A loader caches
    what it parses, and each store's session made a loader of its own: every store opened (a
    process serving many memories, a command walking them) parsed S3's models again, 0.2 s of CPU."""
    return create_loader(get_session().get_config_variable("data_path"))


def _load_models(session: Any) -> None:
    """Load (and so cache in the session's loader) what making an S3 client reads from botocore's data files."""
    loader = session.get_component("data_loader")
    for type_name in ("service-2", "endpoint-rule-set-1", "paginators-1", "waiters-2"):
        loader.load_service_model("s3", type_name=type_name)
    for name in ("_retry", "sdk-default-configuration", "partitions", "endpoints"):
        loader.load_data(name)
