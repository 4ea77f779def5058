"""The changes a writable browser makes: restoring a file to a version and rolling the memory back to
a commit or a time, each first shown as what it would change, then made on a confirming POST."""

from __future__ import annotations

from datetime import UTC, datetime

from a13n_harness.providers.memory import MemoryStoreError
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from ..admin import version_seq
from .access import FORM_FIELD, same_token
from .diff import _diff
from .pages import FILES, Browser, Trouble, _browser, _file_link, _shown, _text_at, _unknown_version, render


async def restore(request: Request) -> Response:
    """GET: what restoring the file to a version would change. POST (writable, with the token): do it."""
    browser = _browser(request)
    path, version = request.query_params.get("path", ""), request.query_params.get("version", "")
    if request.method == "GET":
        # The head first: texts read after it are at least as new, so a POST made on what this page
        # shows is refused if anything was committed since (never done on a newer memory unseen).
        shown = (await browser.store.state()).head
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
