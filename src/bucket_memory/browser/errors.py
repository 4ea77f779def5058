"""What went wrong, as a page: a store error said in the page's terms, `Trouble` a page raised, or
anything unexpected; inside a page (an htmx request) a panel instead."""

from __future__ import annotations

from a13n_harness.providers.memory import MemoryStoreError
from starlette.requests import Request
from starlette.responses import Response

from .pages import FILES, Trouble, render

# How a store error's code reads as an HTTP status, for pages that show it.
STATUS_OF = {
    "not_found": 404,
    "invalid_path": 400,
    "invalid_cursor": 400,
    "forbidden": 403,
    "read_only": 403,
    "version_mismatch": 409,
}


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
