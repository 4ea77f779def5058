"""Finding things in the memory: the files' text searched, and the record memory's records, listed a
page at a time or searched."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from .pages import _browser, render

SEARCH_MATCHES = 100
RECORDS_PAGE = 50


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
    recall = browser.records  # kept across requests: a record is embedded once per process
    query = request.query_params.get("q", "")
    if query.strip():
        found, cursor = list(await recall.search(query, limit=RECORDS_PAGE)), None
    else:
        page = await recall.list(limit=RECORDS_PAGE, cursor=request.query_params.get("cursor"))
        found, cursor = list(page.records), page.next_cursor
    return render(request, "records.html", records=found, query=query, cursor=cursor)
