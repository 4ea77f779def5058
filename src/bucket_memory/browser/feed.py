"""The front page and the change feed: the file tree and the newest changes, which the page polls
for what changed since (and then swaps the tree too)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from a13n_harness.providers.memory import Changes, FileEntry
from starlette.requests import Request
from starlette.responses import Response

from ..records.store import is_record_path
from .pages import Browser, _browser, _row, render

FEED_ENTRIES = 20


async def index(request: Request) -> Response:
    latest = await _latest(_browser(request), None)
    assert latest is not None, "a feed from no cursor always has something to show"
    return render(request, "index.html", **latest)


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
