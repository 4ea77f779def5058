"""What every page of the memory browser shares: the memory it shows (`Browser`), `render`, `Trouble`
(what a page cannot do, said in its own terms), a file's text at a version, and a change as a row.

The memory browser's pages are rendered on the server; htmx keeps the change feed (and with it the
file tree) live.

Reading is open to whoever holds the token: the files, each file's text now or at any version it
had, its history, diffs (line numbers, and the words that changed), search and records, with
times as how long ago. Restore and rollback are shown, and accepted, only when the browser was
started writable; each first shows what it would change and needs a confirming POST carrying the
token. Anything a page cannot do becomes a page (or, inside a page, a panel) that says, in the
page's own terms, what happened and where to go from here, never a broken page.

The pages themselves are in modules by what they show: `feed` (the file list and the change feed),
`files` (a file and its history), `diff`, `restore` (restore and rollback) and `search` (text and
records); `errors` turns what went wrong into a page, and `app` puts each page at its address.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from a13n_harness.providers.memory import FileText, MemoryStoreError, Origin
from jinja2 import Environment, PackageLoader, pass_context, select_autoescape
from jinja2.runtime import Context
from markupsafe import Markup
from starlette.requests import Request
from starlette.responses import HTMLResponse

from ..admin import MemoryAdmin, version_seq
from ..files.store import LogFileStore
from ..records.store import LogRecordStore
from ..reports import Revision, short_principal
from ..state.operations import ErasedVersionError
from .access import FORM_FIELD
from .times import time_element

if TYPE_CHECKING:
    from pydantic_ai import Embedder

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


def _who(principal: str | None) -> Markup:
    """`{{ principal|who }}`: an ARN by the name in its resource (`short_principal`), the whole on hover."""
    return Markup('<span title="{}">{}</span>').format(principal or "", short_principal(principal))


_templates.filters["when"] = _when
_templates.filters["who"] = _who
_templates.filters["breakable"] = _breakable


@dataclass
class Browser:
    """One memory as the browser shows it: its store, its operator view, whether changes are allowed,
    and the embedder its record search uses (None: words alone), through one record store kept
    for as long as the browser runs (`records`), so that the vectors and refusals a search made
    serve every later page."""

    url: str
    store: LogFileStore
    admin: MemoryAdmin
    writable: bool
    origin: Origin
    token: str
    embedder: Embedder | None = None  # the records page's search ranks by meaning too with one
    # What "now" is for the relative times ("3 min ago") on the pages.
    clock: Callable[[], datetime] = field(default=lambda: datetime.now(UTC))
    records: LogRecordStore = field(init=False)

    def __post_init__(self) -> None:
        self.records = LogRecordStore(self.store, embedder=self.embedder)


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
