"""A file's page: its text now or at any version it had (a record's file shown as the record), and
its whole retained history."""

from __future__ import annotations

from dataclasses import dataclass

from a13n_harness.providers.memory import FileText
from starlette.requests import Request
from starlette.responses import Response

from ..records.record_format import Embedding, RecordBody, unpacked
from ..records.store import is_record_path
from .pages import Trouble, _about_file, _browser, _row, _shown, _text_at, render

HISTORY_ENTRIES = 200


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
    vectors: tuple[ShownVector, ...]


@dataclass(frozen=True, slots=True)
class ShownVector:
    """One model's vector of a record as the page says it: its dimensions, or that the model refused
    the text, or (`dimensions` None, not refused) stored bytes that are no vector, which a search
    treats as missing and embeds again."""

    model: str
    dimensions: int | None
    refused: bool


def _record_of(path: str, shown: FileText | None) -> ShownRecord | None:
    """The record a file holds, when it is a record's file and holds one exactly."""
    if shown is None or not is_record_path(path) or (body := RecordBody.decode(shown.text)) is None:
        return None
    vectors = tuple(_shown_vector(stored) for stored in body.embeddings)
    return ShownRecord(body.text, body.updated_at, vectors)


def _shown_vector(stored: Embedding) -> ShownVector:
    """A stored vector is hostile (a writer may store any base64 there): `unpacked` never raises."""
    data = None if stored.refused else unpacked(stored.vector)
    return ShownVector(stored.model, len(data) // 2 if data is not None else None, stored.refused)
