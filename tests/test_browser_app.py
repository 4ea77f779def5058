"""The memory browser's app in-process, through httpx's ASGI transport, on a local directory and on
fake-gcs-server (the Chromium tests drive it on moto): pages, hostile query values, access rules."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from a13n_harness.providers.memory import Origin

from bucket_memory import MemoryAdmin, open_store
from bucket_memory.browser import browser_app

from .conftest import BUCKET, unique_prefix

HOST = "127.0.0.1:9"
TOKEN = "secret-token"


@pytest.fixture(params=["local", "gcs"])
async def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "gcs":
        request.getfixturevalue("gcs_endpoint")
        where = f"gs://{BUCKET}/{unique_prefix()}"
    else:
        where = str(tmp_path / "memory")
    async with open_store(where) as store:
        first = await store.write("notes/plan.md", "ship monday\n", expected=None, origin=Origin(principal_id="ada"))
        await store.write("notes/plan.md", "ship friday\n", expected=first, origin=Origin(principal_id="grace"))
    return where


async def client_for(url: str, *, write: bool) -> AsyncIterator[httpx.AsyncClient]:
    app = browser_app(url, token=TOKEN, host=HOST, writable=write, origin=Origin(run_id="bucket-memory browse"))
    inner: Any = app.app
    async with inner.router.lifespan_context(inner):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url=f"http://{HOST}") as client:
            assert (await client.get(f"/?token={TOKEN}")).status_code == 303
            client.cookies.set("bucket_memory_browse", TOKEN)
            yield client


@pytest.fixture
async def reader(url: str) -> AsyncIterator[httpx.AsyncClient]:
    async for client in client_for(url, write=False):
        yield client


@pytest.fixture
async def writer(url: str) -> AsyncIterator[httpx.AsyncClient]:
    async for client in client_for(url, write=True):
        yield client


async def test_pages_show_the_memory(reader: httpx.AsyncClient) -> None:
    index = await reader.get("/")
    assert index.status_code == 200 and "plan.md" in index.text and "read-only" in index.text
    history = await reader.get("/file", params={"path": "notes/plan.md"})
    assert "grace" in history.text and "ada" in history.text and "restore this version" not in history.text
    diff = await reader.get("/diff", params={"path": "notes/plan.md", "from": "1", "to": "2"})
    assert '<span class="del">-ship monday</span>' in diff.text and '<span class="add">+ship friday</span>' in diff.text
    cursor = index.text.split("since=", 1)[1].split('"', 1)[0]
    assert (await reader.get(f"/feed?since={cursor}")).status_code == 204, "nothing new: htmx keeps the feed"
    for hostile in ("x" * 10_000, "<script>", "../../0", "\u0000"):
        resynced = await reader.get("/feed", params={"since": hostile})
        assert resynced.status_code == 200 and "plan.md" in resynced.text and "<script>" not in resynced.text


async def test_markup_in_the_memory_is_shown_as_text(writer: httpx.AsyncClient, url: str) -> None:
    async with open_store(url) as store:
        hostile = '<script>alert("x")</script>\n'
        await store.write("x.md", hostile, expected=None, origin=Origin(principal_id="<b>mallory</b>"))
    page = (await writer.get("/file", params={"path": "x.md"})).text
    assert "<script>alert" not in page and "&lt;script&gt;alert" in page
    assert "<b>mallory</b>" not in page and "&lt;b&gt;mallory&lt;/b&gt;" in page


@pytest.mark.parametrize(
    ("path", "params", "status", "words"),
    [
        ("/file", {"path": "../etc/passwd"}, 400, "invalid_path"),
        ("/file", {"path": "x" * 5000}, 400, "invalid_path"),
        ("/file", {"path": "absent.md"}, 404, "does not exist"),
        ("/diff", {"path": "notes/plan.md", "from": "99999999999999999999999", "to": "now"}, 404, "not_found"),
        ("/diff", {"path": "notes/plan.md", "from": "-1", "to": "now"}, 404, "not a version"),
        ("/rollback", {"to": "abc"}, 404, "not a version"),
        ("/rollback", {"at": "next tuesday"}, 400, "is not a time"),
        ("/rollback", {"at": "1990-01-01T00:00:00Z"}, 404, "nothing before"),
        ("/records", {"cursor": "after:garbage"}, 400, "invalid_cursor"),
    ],
)
async def test_hostile_values_get_messages(
    writer: httpx.AsyncClient, path: str, params: dict[str, str], status: int, words: str
) -> None:
    answer = await writer.get(path, params=params)
    assert answer.status_code == status and words in answer.text, answer.text[-400:]
    assert 'role="alert"' in answer.text and "<header>" in answer.text, "a page with the message, not a traceback"


async def test_feed_errors_are_panels_for_htmx(reader: httpx.AsyncClient) -> None:
    answer = await reader.get("/file", params={"path": "/abs"}, headers={"HX-Request": "true"})
    assert answer.status_code == 400 and answer.text.startswith('<div class="error" role="alert">')


async def test_restore_needs_write_and_the_form_token(reader: httpx.AsyncClient, url: str) -> None:
    refused = await reader.post("/restore?path=notes/plan.md&version=1", data={"token": TOKEN})
    assert refused.status_code == 403 and "read-only" in refused.text
    async for writer in client_for(url, write=True):
        assert (await writer.post("/restore?path=notes/plan.md&version=1", data={})).status_code == 403
        done = await writer.post("/restore?path=notes/plan.md&version=1", data={"token": TOKEN})
        assert done.status_code == 303 and "restored=3" in done.headers["location"]
    async with open_store(url) as store:
        assert (await store.read("notes/plan.md")).text == "ship monday\n"


async def test_access_rules() -> None:
    app = browser_app("/nonexistent", token=TOKEN, host=HOST, writable=False, origin=Origin())
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url=f"http://{HOST}") as client:
        assert (await client.get("/")).status_code == 403
        assert (await client.get("/?token=nope")).status_code == 403
        entered = await client.get(f"/?token={TOKEN}&q=x")
        assert entered.status_code == 303 and entered.headers["location"] == "/?q=x", "the token leaves the URL"
        cookie = entered.headers["set-cookie"].lower()
        assert "httponly" in cookie and "samesite=strict" in cookie
    async with httpx.AsyncClient(transport=transport, base_url="http://attacker.example") as client:
        assert (await client.get(f"/?token={TOKEN}")).status_code == 403, "another Host (DNS rebinding)"


async def test_rollback_to_a_time_previews_then_commits(writer: httpx.AsyncClient, url: str) -> None:
    async with open_store(url) as store:
        (first,) = [revision for revision in await MemoryAdmin(store).revisions() if revision.version == "1"]
    preview = await writer.get("/rollback", params={"at": first.time})
    assert preview.status_code == 200 and "Written back (1)" in preview.text, preview.text[-300:]
    assert "Roll back to commit 1" in preview.text
    done = await writer.post("/rollback?to=1", data={"token": TOKEN})
    assert "as new commit 3" in done.text
    async with open_store(url) as store:
        assert (await store.read("notes/plan.md")).text == "ship monday\n"


def test_browse_refuses_a_wrong_url_and_a_taken_port(tmp_path: Path) -> None:
    import socket

    from .helpers import cli

    assert "nothing was ever written" in cli("browse", str(tmp_path / "none"), "--no-open", expect=4).lower()
    memory = tmp_path / "memory"
    cli("put", str(memory), "a.md", given="x\n")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = str(taken.getsockname()[1])
        refused = cli("browse", str(memory), "--no-open", "--port", port, expect=2)
    assert f"cannot listen on 127.0.0.1:{port}" in refused and "--port" in refused
