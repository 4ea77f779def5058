"""The memory browser's app in-process, through httpx's ASGI transport, on a local directory and on
fake-gcs-server (the Chromium tests drive it on moto): pages, hostile query values, access rules."""

from __future__ import annotations

from collections.abc import AsyncIterator
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import httpx
import pytest
from a13n_harness.providers.memory import Origin
from starlette.applications import Starlette

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


def starlette_of(app: Any) -> Starlette:
    """The Starlette app inside the browser's middleware, whose lifespan opens the store."""
    while not isinstance(app, Starlette):
        app = app.app
    return app


async def client_for(url: str, *, write: bool) -> AsyncIterator[httpx.AsyncClient]:
    app = browser_app(url, token=TOKEN, host=HOST, writable=write, origin=Origin(run_id="bucket-memory browse"))
    inner = starlette_of(app)
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
        hostile = '<script>alert("x")</script>\n<div hx-post="/rollback?to=1" hx-trigger="load">\n'
        await store.write("x.md", hostile, expected=None, origin=Origin(principal_id="<b>mallory</b>"))
    page = (await writer.get("/file", params={"path": "x.md"})).text
    assert "<script>alert" not in page and "&lt;script&gt;alert" in page
    assert "<div hx-post" not in page and "&lt;div hx-post" in page, "no element for htmx to act on"
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


def assert_guarded(answer: httpx.Response) -> None:
    """The answer carries the frame, script, referrer and sniffing headers, once each."""
    where = f"{answer.request.method} {answer.request.url.path} -> {answer.status_code}"
    for name, value in [
        ("x-frame-options", "DENY"),
        ("referrer-policy", "no-referrer"),
        ("x-content-type-options", "nosniff"),
    ]:
        assert answer.headers.get_list(name) == [value], where
    (policy,) = answer.headers.get_list("content-security-policy")
    directives = {name: rest for name, *rest in (part.split() for part in policy.split(";"))}
    assert directives["frame-ancestors"] == ["'none'"] and directives["default-src"] == ["'self'"], where
    assert "unsafe-inline" not in policy and "unsafe-eval" not in policy and "script-src" not in directives, where


@pytest.mark.parametrize("url", ["local"], indirect=True)
async def test_every_answer_carries_the_security_headers(writer: httpx.AsyncClient, url: str) -> None:
    index = await writer.get("/")
    cursor = index.text.split("since=", 1)[1].split('"', 1)[0]
    answers = [
        index,
        await writer.get("/file", params={"path": "notes/plan.md"}),
        await writer.get("/diff", params={"path": "notes/plan.md", "from": "1", "to": "2"}),
        await writer.get("/feed"),
        await writer.get("/feed", params={"since": cursor}),  # 204
        await writer.get("/search", params={"q": "ship"}),
        await writer.get("/records"),
        await writer.get("/restore", params={"path": "notes/plan.md", "version": "1"}),
        await writer.get("/rollback", params={"to": "1"}),
        await writer.get("/static/htmx.min.js"),
        await writer.get("/static/browser.css"),
        await writer.get("/static/absent.js"),  # 404 from the static files
        await writer.get("/nowhere"),  # 404 from the router
        await writer.get("/file", params={"path": "../x"}),  # a store error's page
        await writer.get("/file", params={"path": "../x"}, headers={"HX-Request": "true"}),  # its panel
        await writer.post("/rollback?to=1", data={}),  # no form token
        await writer.post("/rollback?to=1", data={"token": TOKEN}, headers={"Origin": "http://127.0.0.1:8"}),
        await writer.get(f"/?token={TOKEN}"),  # the redirect that sets the cookie
        await writer.get("/", headers={"Host": "attacker.example"}),  # refused for its Host
        await writer.post("/restore?path=notes/plan.md&version=1", data={"token": TOKEN}),  # done: a redirect
        await writer.post("/rollback?to=1", data={"token": TOKEN}),  # done: a page
    ]
    writer.cookies.clear()
    answers.append(await writer.get("/"))  # refused for want of the token
    statuses = [answer.status_code for answer in answers]
    assert statuses == [200] * 4 + [204] + [200] * 6 + [404, 404, 400, 400, 403, 403, 303, 403, 303, 200, 403]
    for answer in answers:
        assert_guarded(answer)


@pytest.mark.parametrize("url", ["local"], indirect=True)
async def test_an_unexpected_error_carries_the_security_headers(url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    app = browser_app(url, token=TOKEN, host=HOST, writable=False, origin=Origin())
    inner = starlette_of(app)

    async def broken(*_: object, **__: object) -> None:
        raise RuntimeError("a bug")

    async with inner.router.lifespan_context(inner):
        monkeypatch.setattr(inner.state.browser.store, "list", broken)
        # Starlette answers 500 and then re-raises, for the server to log: the client is to see the answer.
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url=f"http://{HOST}") as client:
            answer = await client.get("/", headers={"Cookie": f"bucket_memory_browse={TOKEN}"})
    assert answer.status_code == 500 and "RuntimeError" in answer.text
    assert_guarded(answer)


class InlineCode(HTMLParser):
    """What of a page the CSP would block: inline script or style, event handlers, javascript: links."""

    def __init__(self) -> None:
        super().__init__()
        self.found: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        named = dict(attrs)
        if tag == "style" or (tag == "script" and not named.get("src")):
            self.found.append(f"<{tag}> inline")
        self.found += [f"<{tag} {name}>" for name in named if name.startswith("on") or name == "style"]
        self.found += [f"<{tag} {name}={value}>" for name, value in attrs if (value or "").startswith("javascript:")]


@pytest.mark.parametrize("url", ["local"], indirect=True)
async def test_no_page_has_inline_code(writer: httpx.AsyncClient) -> None:
    pages = [
        ("/", {}),
        ("/file", {"path": "notes/plan.md"}),
        ("/diff", {"path": "notes/plan.md", "from": "1", "to": "2"}),
        ("/feed", {}),
        ("/search", {"q": "ship"}),
        ("/records", {}),
        ("/restore", {"path": "notes/plan.md", "version": "1"}),
        ("/rollback", {"to": "1"}),
        ("/file", {"path": "../x"}),
    ]
    for path, params in pages:
        parser = InlineCode()
        parser.feed((await writer.get(path, params=params)).text)
        assert parser.found == [], (path, parser.found)
    # The parser sees what it should: a page it would pass does not hide inline code from it.
    planted = InlineCode()
    planted.feed('<script>x()</script><style>b{}</style><a onclick="x()" style="" href="javascript:x()">')
    assert len(planted.found) == 5


@pytest.mark.parametrize("url", ["local"], indirect=True)
async def test_a_change_from_another_page_is_refused(writer: httpx.AsyncClient, url: str) -> None:
    """A page on another port of 127.0.0.1 is the same site, so the browser sends the SameSite
    cookie with its POST; what it says of the request's source refuses it, and it cannot know the
    form token. Under Referrer-Policy no-referrer the page's own forms send Origin: null."""
    own = f"http://{HOST}"
    refused_sources = [
        {"Origin": "http://127.0.0.1:8"},
        {"Origin": "http://localhost:8"},
        {"Origin": "http://attacker.example"},
        {"Origin": f"{own}.attacker.example"},
        {"Origin": "null"},  # what any page gets by asking for no referrer
        {"Origin": "null", "Sec-Fetch-Site": "same-site"},
        {"Origin": own, "Sec-Fetch-Site": "same-site"},  # a forged Origin, but the browser's own word
        {"Origin": own, "Sec-Fetch-Site": "cross-site"},
        {"Sec-Fetch-Site": "none"},
    ]
    for headers in refused_sources:
        for path in ("/rollback?to=1", "/restore?path=notes/plan.md&version=1"):
            refused = await writer.post(path, data={"token": TOKEN}, headers=headers)
            assert refused.status_code == 403 and "own page" in refused.text, (headers, path)
    for token in ("", "guess", TOKEN + "x", TOKEN[:-1]):
        refused = await writer.post("/rollback?to=1", data={"token": token}, headers={"Origin": own})
        assert refused.status_code == 403 and "did not come from this page" in refused.text, token
    async with open_store(url) as store:
        assert (await store.read("notes/plan.md")).version == "2", "nothing changed"
    own_form = {"Origin": "null", "Sec-Fetch-Site": "same-origin"}
    done = await writer.post("/restore?path=notes/plan.md&version=1", data={"token": TOKEN}, headers=own_form)
    assert done.status_code == 303, "the page's own form, as a browser sends it"


async def test_a_diff_being_made_holds_up_no_other_page(
    reader: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While one diff is worked out (held here until the other page has answered), the tree still
    loads: diffs run off the event loop (difflib on the loop stalled every page for minutes)."""
    import asyncio
    import threading

    from bucket_memory.browser import pages
    from bucket_memory.diffs import unified_diff

    started, release = threading.Event(), threading.Event()

    def held(*arguments: str) -> list[str]:
        started.set()
        release.wait()
        return unified_diff(*arguments)

    monkeypatch.setattr(pages, "unified_diff", held)
    diffing = asyncio.create_task(reader.get("/diff", params={"path": "notes/plan.md", "from": "1", "to": "2"}))
    await asyncio.to_thread(started.wait)
    try:
        assert (await reader.get("/")).status_code == 200
    finally:
        release.set()
    assert '<span class="add">+ship friday</span>' in (await diffing).text
