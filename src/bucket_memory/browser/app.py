"""The browser as an ASGI app: each page at its address, the store opened for as long as the app
runs, and what goes wrong made a page."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from a13n_harness.providers.memory import MemoryStoreError, Origin
from starlette.applications import Starlette
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from ..admin import MemoryAdmin
from ..connect import open_store
from .access import TokenAccess
from .diff import diff_view
from .errors import store_error, trouble, unexpected_error
from .feed import feed, index
from .files import file_view
from .headers import SecurityHeaders
from .pages import Browser, Trouble
from .restore import restore, rollback
from .search import records, search

if TYPE_CHECKING:
    from pydantic_ai import Embedder


def browser_app(
    url: str, *, token: str, host: str, writable: bool, origin: Origin, embedder: Embedder | None = None
) -> SecurityHeaders:
    """The ASGI app serving the memory at `url` on `host` (127.0.0.1:port); the store opens in its
    lifespan. With an `embedder`, the records page searches by meaning too."""

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with AsyncExitStack() as resources:
            store = await resources.enter_async_context(open_store(url, read_only=not writable))
            app.state.browser = Browser(url, store, MemoryAdmin(store), writable, origin, token, embedder)
            yield

    app = Starlette(
        routes=[
            Route("/", index),
            Route("/file", file_view),
            Route("/diff", diff_view),
            Route("/feed", feed),
            Route("/search", search),
            Route("/records", records),
            Route("/restore", restore, methods=["GET", "POST"]),
            Route("/rollback", rollback, methods=["GET", "POST"]),
            Mount("/static", StaticFiles(directory=Path(__file__).parent / "static"), name="static"),
        ],
        lifespan=lifespan,
        exception_handlers={Trouble: trouble, MemoryStoreError: store_error, Exception: unexpected_error},
    )
    return SecurityHeaders(TokenAccess(app, token=token, host=host))
