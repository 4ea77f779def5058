"""The memory browser's pages, rendered on the server; htmx keeps the change feed (and with it the
file tree) live.

Reading is open to whoever holds the token. Restore and rollback are shown, and accepted, only
when the browser was started writable; each first shows what it would change and needs a
confirming POST carrying the token. A store error becomes a page (or, inside a page, a panel)
with its message, never a broken page.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote

from a13n_harness.providers.memory import Changes, FileEntry, MemoryStoreError, Origin
from jinja2 import Environment, PackageLoader, select_autoescape
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from ..admin import MemoryAdmin, Revision, version_seq
from ..connect import open_store
from ..diffs import unified_diff
from ..records import LogRecordStore, is_record_path
from ..store import LogFileStore
from .access import FORM_FIELD, TokenAccess, same_token
from .headers import SecurityHeaders

FEED_ENTRIES = 20
HISTORY_ENTRIES = 200
SEARCH_MATCHES = 100
RECORDS_PAGE = 50
# How a store error's code reads as an HTTP status, for pages that show it.
STATUS_OF = {
    "not_found": 404,
    "invalid_path": 400,
    "invalid_cursor": 400,
    "forbidden": 403,
    "read_only": 403,
    "version_mismatch": 409,
}

_templates = Environment(loader=PackageLoader("bucket_memory.browser", "templates"), autoescape=select_autoescape())


@dataclass
class Browser:
    """One memory as the browser shows it: its store, its operator view, whether changes are allowed."""

    url: str
    store: LogFileStore
    admin: MemoryAdmin
    writable: bool
    origin: Origin
    token: str


def browser_app(url: str, *, token: str, host: str, writable: bool, origin: Origin) -> SecurityHeaders:
    """The ASGI app serving the memory at `url` on `host` (127.0.0.1:port); the store opens in its lifespan."""

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with AsyncExitStack() as resources:
            store = await resources.enter_async_context(open_store(url, read_only=not writable))
            app.state.browser = Browser(url, store, MemoryAdmin(store), writable, origin, token)
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
        exception_handlers={MemoryStoreError: store_error, Exception: unexpected_error},
    )
    return SecurityHeaders(TokenAccess(app, token=token, host=host))


def render(request: Request, template: str, status_code: int = 200, **values: Any) -> HTMLResponse:
    browser = _browser(request)
    page = _templates.get_template(template).render(
        url=browser.url, writable=browser.writable, token=browser.token, token_field=FORM_FIELD, **values
    )
    return HTMLResponse(page, status_code=status_code)


def _browser(request: Request) -> Browser:
    browser: Browser = request.app.state.browser
    return browser


async def index(request: Request) -> Response:
    latest = await _latest(_browser(request), None)
    assert latest is not None, "a feed from no cursor always has something to show"
    return render(request, "index.html", **latest)


async def file_view(request: Request) -> Response:
    browser = _browser(request)
    path = request.query_params.get("path", "")
    history = await browser.admin.revisions(path, limit=HISTORY_ENTRIES)
    try:
        current = await browser.store.read(path)
    except MemoryStoreError as error:
        if error.code != "not_found" or not history:
            raise
        current = None  # deleted: its history still shows, and a restore brings it back
    return render(
        request,
        "file.html",
        path=path,
        current=current,
        history=[_row(revision) for revision in history],
        restored=request.query_params.get("restored"),
    )


async def diff_view(request: Request) -> Response:
    browser = _browser(request)
    path = request.query_params.get("path", "")
    start, end = request.query_params.get("from", ""), request.query_params.get("to", "now")
    lines = await _diff(browser, path, start, end)
    return render(request, "diff.html", path=path, start=start, end=end, lines=lines)


async def feed(request: Request) -> Response:
    """The change feed: the newest changes and the store's cursor. Polled with the cursor the page
    has; nothing changed since is 204, which htmx leaves in place."""
    latest = await _latest(_browser(request), request.query_params.get("since"))
    return Response(status_code=204) if latest is None else render(request, "feed.html", **latest)


async def _latest(browser: Browser, since: str | None) -> dict[str, Any] | None:
    """The files, the feed's newest changes, the cursor they bring it to, and the paths changed after
    `since` (the page then swaps the tree too); None when nothing changed after it."""
    changes = await browser.store.changes(since)
    if since is not None and isinstance(changes, Changes) and not changes.paths:
        return None
    fresh = set(changes.paths) if isinstance(changes, Changes) and since is not None else set()
    entries = await browser.store.list()
    rows = [_row(revision) for revision in await browser.admin.revisions(limit=FEED_ENTRIES)]
    return {
        "cursor": changes.cursor,
        "rows": rows,
        "fresh": fresh,
        "tree": _tree(entries),
        "files": len(entries),
        "has_records": any(is_record_path(entry.path) for entry in entries),
    }


async def search(request: Request) -> Response:
    browser = _browser(request)
    pattern = request.query_params.get("q", "")
    if not pattern.strip():
        return render(request, "search.html", pattern=pattern, matches=[], truncated=False)
    matches, truncated = await browser.store.search(
        pattern, regex=False, case_sensitive=False, path="", limit=SEARCH_MATCHES
    )
    return render(request, "search.html", pattern=pattern, matches=matches, truncated=truncated)


async def records(request: Request) -> Response:
    browser = _browser(request)
    recall = LogRecordStore(browser.store)
    query = request.query_params.get("q", "")
    if query.strip():
        found, cursor = list(await recall.search(query, limit=RECORDS_PAGE)), None
    else:
        page = await recall.list(limit=RECORDS_PAGE, cursor=request.query_params.get("cursor"))
        found, cursor = list(page.records), page.next_cursor
    return render(request, "records.html", records=found, query=query, cursor=cursor)


async def restore(request: Request) -> Response:
    """GET: what restoring the file to a version would change. POST (writable, with the token): do it."""
    browser = _browser(request)
    path, version = request.query_params.get("path", ""), request.query_params.get("version", "")
    if request.method == "GET":
        lines = await _diff(browser, path, "now", version, missing_ok=True)
        return render(request, "restore.html", path=path, version=version, lines=lines)
    if (refusal := await _refused_change(request)) is not None:
        return refusal
    made = await browser.admin.restore(path, version, origin=browser.origin)
    where = f"/file?path={quote(path, safe='')}&restored={made or 'deleted'}"
    return RedirectResponse(where, status_code=303)


async def rollback(request: Request) -> Response:
    """GET: what making the memory what it was at a commit or time would change. POST: do it."""
    browser = _browser(request)
    target = await _rollback_target(browser, request.query_params.get("to", ""), request.query_params.get("at", ""))
    if request.method == "GET":
        preview = await browser.admin.preview_rollback(target)
        return render(request, "rollback.html", target=target, preview=preview)
    if (refusal := await _refused_change(request)) is not None:
        return refusal
    made = await browser.admin.rollback(target, origin=browser.origin)
    return render(request, "done.html", message=_rolled_back(target, made))


async def _refused_change(request: Request) -> Response | None:
    browser = _browser(request)
    if not browser.writable:
        message = "This browser is read-only: nothing was changed. Start it with --write to restore or roll back."
        return render(request, "error.html", status_code=403, message=message)
    form = await request.form()
    if not same_token(form.get(FORM_FIELD), browser.token):
        return render(request, "error.html", status_code=403, message="The change did not come from this page.")
    return None


async def _rollback_target(browser: Browser, to: str, at: str) -> int:
    if at.strip():
        try:
            moment = datetime.fromisoformat(at.strip())
        except ValueError:
            raise MemoryStoreError(
                "invalid_path", f"{at[:40]!r} is not a time: give one such as 2026-12-01T17:00:00Z (UTC if no zone)."
            ) from None
        return await browser.admin.seq_at(moment if moment.tzinfo else moment.replace(tzinfo=UTC))
    return version_seq(to)


def _rolled_back(target: int, made: int | None) -> str:
    if made is None:
        return f"Nothing changed: the memory already is what it was at commit {target}."
    return f"The memory is now what it was at commit {target}, as new commit {made} (itself undoable)."


async def _diff(browser: Browser, path: str, start: str, end: str, *, missing_ok: bool = False) -> list[str]:
    async def text(version: str) -> str:
        try:
            found = await (browser.store.read(path) if version == "now" else browser.admin.read_at(path, version))
        except MemoryStoreError as error:
            if missing_ok and error.code == "not_found":
                return ""
            raise
        return found.text

    before, after = await text(start), await text(end)
    # Off the loop: every other page (the feed, other tabs) keeps answering while a large pair is diffed.
    return await asyncio.to_thread(unified_diff, before, after, f"{path}@{start}", f"{path}@{end}")


@dataclass(frozen=True)
class Row:
    """One change as the pages show it."""

    path: str
    version: str
    time: str
    action: str
    other: str | None
    size: int | None
    principal: str | None
    run: str | None
    tool_call: str | None


def _row(revision: Revision) -> Row:
    origin = revision.origin
    return Row(
        revision.path,
        revision.version,
        revision.time,
        revision.action,
        revision.other,
        revision.size,
        origin.principal_id,
        origin.run_id,
        origin.tool_call_id,
    )


@dataclass
class Folder:
    """A folder of the tree: its files and subfolders, by name."""

    name: str
    path: str
    folders: dict[str, Folder]
    files: list[FileEntry]


def _tree(entries: list[FileEntry]) -> Folder:
    root = Folder("", "", {}, [])
    for entry in sorted(entries, key=lambda entry: entry.path):
        *folders, _ = entry.path.split("/")
        here = root
        for name in folders:
            here = here.folders.setdefault(name, Folder(name, f"{here.path}{name}/", {}, []))
        here.files.append(entry)
    return root


async def store_error(request: Request, error: Exception) -> Response:
    assert isinstance(error, MemoryStoreError)
    status = STATUS_OF.get(error.code, 503)
    return _error_page(request, status, f"{error.code}: {error}")


async def unexpected_error(request: Request, error: Exception) -> Response:
    return _error_page(request, 500, f"Something failed that nobody expected ({type(error).__name__}); try again.")


def _error_page(request: Request, status: int, message: str) -> Response:
    # An htmx request swaps the answer into part of a page: a panel, not a whole page inside it.
    template = "error-panel.html" if request.headers.get("hx-request") else "error.html"
    return render(request, template, status_code=status, message=message)
