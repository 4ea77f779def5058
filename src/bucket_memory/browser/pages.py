"""The memory browser's pages, rendered on the server; htmx keeps the change feed (and with it the
file tree) live.

Reading is open to whoever holds the token: the files, each file's text now or at any version it
had, its history, diffs (line numbers, and the words that changed), search and records, with
times as how long ago. Restore and rollback are shown, and accepted, only when the browser was
started writable; each first shows what it would change and needs a confirming POST carrying the
token. Anything a page cannot do becomes a page (or, inside a page, a panel) that says, in the
page's own terms, what happened and where to go from here, never a broken page.
"""

from __future__ import annotations

import asyncio
import base64
import re
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote

from a13n_harness.providers.memory import Changes, FileEntry, FileText, MemoryStoreError, Origin
from jinja2 import Environment, PackageLoader, pass_context, select_autoescape
from jinja2.runtime import Context
from markupsafe import Markup
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from ..admin import MemoryAdmin, Revision, version_seq
from ..connect import open_store
from ..diffs import LineDiff, line_diff
from ..operations import ErasedVersionError
from ..record_format import RecordBody
from ..records import LogRecordStore, is_record_path
from ..store import LogFileStore
from .access import FORM_FIELD, TokenAccess, same_token
from .headers import SecurityHeaders
from .times import time_element

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


@pass_context
def _when(context: Context, time: str | datetime | None) -> Markup:
    """`{{ time|when }}`: how long before the page was rendered, the exact time on hover."""
    now: datetime = context["now"]
    return time_element(time, now)


# Where a path or a principal (an ARN) may break across lines: after a / or a :, never inside a name.
_BREAKS = re.compile(r"(?<=[/:])")


def _breakable(text: str | None) -> Markup:
    """`{{ path|breakable }}`: the text escaped, each part up to a / or : kept whole on its line (a
    <span class="part">, unless it is wider than the line), with a <wbr> after each."""
    parts = [part for part in _BREAKS.split(text or "") if part]
    return Markup("<wbr>").join(Markup('<span class="part">{}</span>').format(part) for part in parts)


_templates.filters["when"] = _when
_templates.filters["breakable"] = _breakable


@dataclass
class Browser:
    """One memory as the browser shows it: its store, its operator view, whether changes are allowed."""

    url: str
    store: LogFileStore
    admin: MemoryAdmin
    writable: bool
    origin: Origin
    token: str
    # What "now" is for the relative times ("3 min ago") on the pages.
    clock: Callable[[], datetime] = field(default=lambda: datetime.now(UTC))


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
        exception_handlers={Trouble: trouble, MemoryStoreError: store_error, Exception: unexpected_error},
    )
    return SecurityHeaders(TokenAccess(app, token=token, host=host))


def render(request: Request, template: str, status_code: int = 200, **values: Any) -> HTMLResponse:
    browser = _browser(request)
    page = _templates.get_template(template).render(
        url=browser.url,
        writable=browser.writable,
        token=browser.token,
        token_field=FORM_FIELD,
        now=browser.clock(),
        **values,
    )
    return HTMLResponse(page, status_code=status_code)


def _browser(request: Request) -> Browser:
    browser: Browser = request.app.state.browser
    return browser


def _file_link(path: str, version: str | None = None) -> str:
    return f"/file?path={quote(path)}" + (f"&version={quote(version, safe='')}" if version else "")


class Trouble(Exception):
    """Something the page cannot do, said in its own terms: what happened and where to go from here
    (links, as (address, words)); `detail` is the store's own message, for whoever runs the browser."""

    def __init__(
        self, status: int, message: str, links: Sequence[tuple[str, str]] = (), detail: str | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.links = list(links) or [FILES]
        self.detail = detail


FILES = ("/", "Go back to the file list")


def _about_file(path: str) -> list[tuple[str, str]]:
    return [(_file_link(path), f"See the history of {_shown(path)}"), FILES]


def _shown(text: str, limit: int = 80) -> str:
    """A value from the address, cut short to be shown in a sentence."""
    return text if len(text) <= limit else f"{text[:limit]}…"


async def index(request: Request) -> Response:
    latest = await _latest(_browser(request), None)
    assert latest is not None, "a feed from no cursor always has something to show"
    return render(request, "index.html", **latest)


async def file_view(request: Request) -> Response:
    """A file: its text now, or at `version`, and its whole retained history."""
    browser = _browser(request)
    path, version = request.query_params.get("path", ""), request.query_params.get("version", "")
    history = await browser.admin.revisions(path, limit=HISTORY_ENTRIES)
    current = await _text_at(browser, path, "now")
    if current is None and not history:
        raise Trouble(
            404,
            f"There is no file {_shown(path)} in this memory, nor one by that name in the history it keeps.",
        )
    shown = current
    if version and (current is None or version != current.version):
        shown = await _text_at(browser, path, version)
        if shown is None:
            raise Trouble(
                404,
                f"{_shown(path)} did not exist at version {version}: it was deleted or moved away then, or not yet "
                "written. Its history shows the versions it had.",
                _about_file(path),
            )
    return render(
        request,
        "file.html",
        path=path,
        current=current,
        shown=shown,
        record=_record_of(path, shown),
        history=[_row(revision) for revision in history],
        restored=request.query_params.get("restored"),
    )


@dataclass(frozen=True)
class ShownRecord:
    """A record memory's file as a person reads it: the record, not its JSON and base64 vector."""

    text: str
    updated_at: str
    vectors: tuple[tuple[str, int], ...]  # model and dimensions (0: the model refused the text)


def _record_of(path: str, shown: FileText | None) -> ShownRecord | None:
    """The record a file holds, when it is a record's file and holds one exactly."""
    if shown is None or not is_record_path(path) or (body := RecordBody.decode(shown.text)) is None:
        return None
    vectors = tuple((stored.model, len(base64.b64decode(stored.vector)) // 2) for stored in body.embeddings)
    return ShownRecord(body.text, body.updated_at, vectors)


async def diff_view(request: Request) -> Response:
    browser = _browser(request)
    path = request.query_params.get("path", "")
    start, end = request.query_params.get("from", ""), request.query_params.get("to", "now")
    before, after = await _text_at(browser, path, start), await _text_at(browser, path, end)
    if before is None and after is None:
        where = " or ".join("now" if version == "now" else f"at version {version}" for version in {start: 0, end: 0})
        raise Trouble(404, f"{_shown(path)} did not exist {where}: there is nothing to compare.", _about_file(path))
    diff = await _diff(before, after)
    return render(
        request,
        "diff.html",
        path=path,
        start=start,
        end=end,
        diff=diff,
        missing=[version for version, text in ((start, before), (end, after)) if text is None],
    )


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
        # The head first: texts read after it are at least as new, so a POST made on what this page
        # shows is refused if anything was committed since (never done on a newer memory unseen).
        shown = (await browser.store.log.fresh_state()).head
        current, wanted = await _text_at(browser, path, "now"), await _text_at(browser, path, version)
        diff = await _diff(current, wanted)
        return render(
            request, "restore.html", path=path, version=version, diff=diff, deletes=wanted is None, shown=shown
        )
    at = await _check_change(request)
    made = await browser.admin.restore(path, version, origin=browser.origin, at=at)
    where = f"{_file_link(path)}&restored={made or 'deleted'}"
    return RedirectResponse(where, status_code=303)


async def rollback(request: Request) -> Response:
    """GET: what making the memory what it was at a commit or time would change. POST: do it."""
    browser = _browser(request)
    target = await _rollback_target(browser, request.query_params.get("to", ""), request.query_params.get("at", ""))
    if request.method == "GET":
        try:
            preview = await browser.admin.preview_rollback(target)
        except MemoryStoreError as error:
            if error.code != "not_found":
                raise
            raise await _unknown_version(browser, str(target), [FILES]) from None
        return render(request, "rollback.html", target=target, preview=preview, shown=preview.seq)
    at = await _check_change(request)
    made = await browser.admin.rollback(target, origin=browser.origin, at=at)
    return render(request, "done.html", message=_rolled_back(target, made))


async def _check_change(request: Request) -> int:
    """Refuse a change unless the browser is writable and the form carries the page's token; the
    memory's head the confirmation showed (the change is made only on that head)."""
    browser = _browser(request)
    if not browser.writable:
        raise Trouble(
            403,
            "This browser is read-only: it shows the memory but changes nothing, so nothing was changed. "
            "Restoring a file or rolling back needs a browser started to allow changes: ask whoever started this one.",
        )
    form = await request.form()
    if not same_token(form.get(FORM_FIELD), browser.token):
        raise Trouble(
            403,
            "The change did not come from this page, so nothing was changed. To make it, open it from the "
            "file's history (restore) or the file list (roll back) and confirm it there.",
        )
    shown = form.get(SHOWN_FIELD)
    if not isinstance(shown, str) or not (shown.isascii() and shown.isdecimal() and len(shown) <= 20):
        raise Trouble(400, "The confirmation did not say which state of the memory it showed; open it again.")
    return int(shown)


SHOWN_FIELD = "shown"


async def _rollback_target(browser: Browser, to: str, at: str) -> int:
    if not (to.strip() or at.strip()):
        raise Trouble(400, "Give the version to roll the memory back to, or a time.")
    if at.strip():
        try:
            moment = datetime.fromisoformat(at.strip())
        except ValueError:
            raise Trouble(
                400,
                f"“{_shown(at, 40)}” is not a time: give one such as 2026-12-01T17:00:00Z (UTC if no zone is given).",
            ) from None
        moment = moment if moment.tzinfo else moment.replace(tzinfo=UTC)
        try:
            return await browser.admin.seq_at(moment)
        except MemoryStoreError as error:
            if error.code != "not_found":
                raise
            kept = await browser.admin.stats()
            since = f"from version {kept.history_floor} on" if kept.history_floor is not None else "no history yet"
            raise Trouble(
                404,
                f"There is nothing before {moment.isoformat()} to roll back to: the memory keeps {since}.",
            ) from None
    try:
        return version_seq(to)
    except MemoryStoreError:
        raise await _unknown_version(browser, to, [FILES]) from None


def _rolled_back(target: int, made: int | None) -> str:
    if made is None:
        return f"Nothing changed: the memory already is what it was at commit {target}."
    return f"The memory is now what it was at commit {target}, as new commit {made} (itself undoable)."


async def _text_at(browser: Browser, path: str, version: str) -> FileText | None:
    """The file at `version` ("now": as it is), None where it did not exist then; a version the
    memory does not hold is Trouble, said in the page's terms."""
    try:
        if version == "now":
            return await browser.store.read(path)
        return await browser.admin.text_at(path, version)
    except ErasedVersionError as error:
        raise Trouble(
            404,
            f"Version {error.version} of {_shown(path)} was erased by commit {error.erasure}: its text is gone for "
            "good. The file's history shows who erased it and when.",
            _about_file(path),
        ) from None
    except MemoryStoreError as error:
        if error.code != "not_found":
            raise
        if version == "now":
            return None
        raise await _unknown_version(browser, version, _about_file(path)) from None


async def _unknown_version(browser: Browser, version: str, links: Sequence[tuple[str, str]]) -> Trouble:
    """Why the memory has no `version`: not a version at all, not made yet, or older than it keeps."""
    try:
        seq = version_seq(version)
    except MemoryStoreError:
        return Trouble(
            404,
            f"“{_shown(version, 40)}” is not a version: versions are the numbers in the list of changes and in "
            "each file's history.",
            links,
        )
    kept = await browser.admin.stats()
    if seq > kept.head:
        return Trouble(404, f"There is no version {seq} yet: the memory's newest version is {kept.head}.", links)
    since = f"its history starts at version {kept.history_floor}" if kept.history_floor is not None else "it has none"
    return Trouble(404, f"Version {seq} is older than the memory keeps: {since}.", links)


async def _diff(before: FileText | None, after: FileText | None) -> LineDiff:
    # Off the loop: every other page (the feed, other tabs) keeps answering while a large pair is diffed.
    return await asyncio.to_thread(line_diff, before.text if before else "", after.text if after else "")


@dataclass(frozen=True)
class Row:
    """One change as the pages show it; `has_text` when the file exists at its version (a link to it)."""

    path: str
    version: str
    time: str
    action: str
    other: str | None
    size: int | None
    principal: str | None
    run: str | None
    tool_call: str | None
    erased: int | None = None  # the commit that erased this version's text

    @property
    def has_text(self) -> bool:
        return bool(self.path) and self.action in ("write", "moved-in") and self.erased is None


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
        revision.erased,
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


# What a store error means to someone looking at the page, and what they can do; the store's own
# message (which may name commands) goes below it, for whoever runs the browser.
ADVICE = {
    "invalid_path": "That is not the name of a file in this memory: names are like notes/plan.md.",
    "invalid_cursor": "That page of the list is no longer where the link points: start again from its first page.",
    "forbidden": "The bucket refused to let this browser do that: the account it runs as is not allowed to.",
    "read_only": "This browser is read-only: it shows the memory but changes nothing, so nothing was changed.",
    "version_mismatch": "The memory changed while you were looking, so nothing was changed. Look again at what "
    "the change would do now, and confirm it again.",
    "unavailable": "The bucket did not answer as it should, so this could not be shown. Try again in a moment.",
}


async def store_error(request: Request, error: Exception) -> Response:
    assert isinstance(error, MemoryStoreError)
    status = STATUS_OF.get(error.code, 503)
    advice = ADVICE.get(error.code, "The memory could not do that.")
    links = [FILES]
    if error.code == "invalid_cursor":
        links = [(request.url.path, "Start again from the first page"), FILES]
    elif error.code == "version_mismatch":
        links = [(_here(request), "See what it would change now"), FILES]  # a GET of a change is its preview
    elif error.code == "unavailable" and request.method == "GET":
        links = [(_here(request), "Try again"), FILES]
    return _error_page(request, Trouble(status, advice, links, detail=f"{error.code}: {error}"))


async def trouble(request: Request, error: Exception) -> Response:
    assert isinstance(error, Trouble)
    return _error_page(request, error)


async def unexpected_error(request: Request, error: Exception) -> Response:
    message = (
        "Something went wrong that this page did not expect. Try again; if it keeps failing, tell whoever runs "
        "the browser."
    )
    links = [(_here(request), "Try again"), FILES] if request.method == "GET" else [FILES]
    return _error_page(request, Trouble(500, message, links, detail=type(error).__name__))


def _here(request: Request) -> str:
    """This request's own address (path and query), to try it again."""
    query = request.url.query
    return request.url.path + (f"?{query}" if query else "")


def _error_page(request: Request, trouble: Trouble) -> Response:
    # An htmx request swaps the answer into part of a page: a panel, not a whole page inside it.
    template = "error-panel.html" if request.headers.get("hx-request") else "error.html"
    values = {"message": trouble.message, "links": trouble.links, "detail": trouble.detail}
    return render(request, template, status_code=trouble.status, **values)
