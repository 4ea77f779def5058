"""A file's diff between two versions (or a version and now): line numbers, and the words that
changed; worked out off the event loop."""

from __future__ import annotations

import asyncio

from a13n_harness.providers.memory import FileText
from starlette.requests import Request
from starlette.responses import Response

from ..diffs import LineDiff, line_diff
from .pages import Trouble, _about_file, _browser, _shown, _text_at, render


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


async def _diff(before: FileText | None, after: FileText | None) -> LineDiff:
    # Off the loop: every other page (the feed, other tabs) keeps answering while a large pair is diffed.
    return await asyncio.to_thread(line_diff, before.text if before else "", after.text if after else "")
