"""The memory browser's app in-process, through httpx's ASGI transport, on a local directory and on
fake-gcs-server (the Chromium tests drive it on moto): pages, hostile query values, access rules."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import httpx
import pytest
from a13n_harness.providers.memory import Origin
from starlette.applications import Starlette

from bucket_memory import LogOptions, MemoryAdmin, open_store
from bucket_memory.browser import browser_app
from bucket_memory.browser.times import ago, time_element

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


async def client_for(url: str, *, write: bool, embedder: Any = None) -> AsyncIterator[httpx.AsyncClient]:
    origin = Origin(run_id="bucket-memory browse")
    app = browser_app(url, token=TOKEN, host=HOST, writable=write, origin=origin, embedder=embedder)
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
    assert '<tr class="removed"><td class="num">1</td><td class="num"></td>' in diff.text
    assert '<tr class="added"><td class="num"></td><td class="num">1</td>' in diff.text
    assert "ship <del>monday</del>" in diff.text and "ship <ins>friday</ins>" in diff.text, "the word that changed"
    cursor = index.text.split("since=", 1)[1].split('"', 1)[0]
    assert (await reader.get(f"/feed?since={cursor}")).status_code == 204, "nothing new: htmx keeps the feed"
    for hostile in ("x" * 10_000, "<script>", "../../0", "\u0000"):
        resynced = await reader.get("/feed", params={"since": hostile})
        assert resynced.status_code == 200 and "plan.md" in resynced.text and "<script>" not in resynced.text


async def test_markup_in_the_memory_is_shown_as_text(writer: httpx.AsyncClient, url: str) -> None:
    async with open_store(url) as store:
        hostile = '<script>alert("x")</script>\n<div hx-post="/rollback?to=1" hx-trigger="load">\n'
        await store.write("x.md", hostile, expected=None, origin=Origin(principal_id="<b>mallory</b>"))
    page = re.sub(r'<wbr>|<span class="part">|</span>', "", (await writer.get("/file", params={"path": "x.md"})).text)
    assert "<script>alert" not in page and "&lt;script&gt;alert" in page
    assert "<div hx-post" not in page and "&lt;div hx-post" in page, "no element for htmx to act on"
    assert "<b>mallory</b>" not in page and "&lt;b&gt;mallory&lt;/b&gt;" in page


async def test_a_principal_arn_is_shown_by_its_name_whole_on_hover(writer: httpx.AsyncClient, url: str) -> None:
    """Issue 45: the "by" column wrapped a full ARN over three lines; it shows the name in its
    resource, as `log` does, and the whole ARN (escaped) as the cell's title."""
    arn = 'arn:aws:sts::123456789012:assumed-role/agent-role/i-0ab"><b>x</b>'
    async with open_store(url) as store:
        await store.write("y.md", "y\n", expected=None, origin=Origin(principal_id=arn))
    page = (await writer.get("/file", params={"path": "y.md"})).text
    shown = "agent-role/i-0ab&#34;&gt;&lt;b&gt;x&lt;/b&gt;"
    assert f'<span title="arn:aws:sts::123456789012:assumed-role/{shown}">{shown}</span>' in page
    assert "<b>x</b>" not in page and "123456789012" not in page.replace('title="arn:aws:sts::123456789012', "")


# Each with what the page says, in its own terms (no command to run: whoever reads it may have no
# command line), and where it offers to go next.
@pytest.mark.parametrize(
    ("path", "params", "status", "words", "link"),
    [
        ("/file", {"path": "../etc/passwd"}, 400, "not the name of a file in this memory", "/"),
        ("/file", {"path": "x" * 5000}, 400, "not the name of a file in this memory", "/"),
        ("/file", {"path": "absent.md"}, 404, "There is no file absent.md in this memory", "/"),
        ("/file", {"path": "notes/plan.md", "version": "99"}, 404, "There is no version 99 yet", "/file?path="),
        ("/file", {"path": "notes/plan.md", "version": "v1"}, 404, "“v1” is not a version", "/file?path="),
        ("/diff", {"path": "notes/plan.md", "from": "99", "to": "now"}, 404, "no version 99 yet", "/file?path="),
        ("/diff", {"path": "notes/plan.md", "from": "9" * 23, "to": "now"}, 404, "is not a version", "/file?path="),
        ("/diff", {"path": "notes/plan.md", "from": "-1", "to": "now"}, 404, "“-1” is not a version", "/file?path="),
        ("/diff", {"path": "absent.md", "from": "1", "to": "now"}, 404, "did not exist at version 1 or now", "/"),
        ("/restore", {"path": "notes/plan.md", "version": "99"}, 404, "There is no version 99 yet", "/file?path="),
        ("/rollback", {"to": "abc"}, 404, "“abc” is not a version", "/"),
        ("/rollback", {"to": "", "at": ""}, 400, "Give the version to roll the memory back to", "/"),
        ("/rollback", {"to": "99"}, 404, "There is no version 99 yet", "/"),
        ("/rollback", {"at": "next tuesday"}, 400, "“next tuesday” is not a time", "/"),
        ("/rollback", {"at": "1990-01-01T00:00:00Z"}, 404, "nothing before 1990-01-01", "/"),
        ("/records", {"cursor": "after:garbage"}, 400, "start again from its first page", "/records"),
    ],
)
async def test_hostile_values_get_messages(
    writer: httpx.AsyncClient, path: str, params: dict[str, str], status: int, words: str, link: str
) -> None:
    answer = await writer.get(path, params=params)
    assert answer.status_code == status and words in answer.text, answer.text[-600:]
    assert 'role="alert"' in answer.text and "<header>" in answer.text, "a page with the message, not a traceback"
    assert_advice_in_page_terms(answer.text, link)


def assert_advice_in_page_terms(page: str, link: str) -> None:
    """The error's message names no command or option, and it links somewhere to go from here."""
    (alert,) = re.findall(r'<div class="error" role="alert">(.*?)</div>', page, re.DOTALL)
    said = alert.split("<details>", 1)[0]  # the store's own words, for whoever runs the browser, below
    for command_like in ("bucket-memory", "--", "`", "recover", "Run "):
        assert command_like not in said, (command_like, said)
    assert re.search(rf'<ul class="actions">.*<a href="{re.escape(link)}', said, re.DOTALL), said


@pytest.mark.parametrize("url", ["local"], indirect=True)
async def test_a_version_older_than_the_memory_keeps_says_so(url: str) -> None:
    keep_little = LogOptions(
        checkpoint_min_commits=1, checkpoint_max_commits=2, grace_period=0, retain_commits=1, retain_seconds=0
    )
    async with open_store(url, options=keep_little) as store:
        version = (await store.read("notes/plan.md")).version
        for text in ("a\n", "b\n", "c\n", "d\n"):
            version = await store.write("notes/plan.md", text, expected=version, origin=Origin())
    async for reader in client_for(url, write=False):
        for path, params in [
            ("/diff", {"path": "notes/plan.md", "from": "1", "to": "now"}),
            ("/file", {"path": "notes/plan.md", "version": "1"}),
            ("/rollback", {"to": "1"}),
        ]:
            answer = await reader.get(path, params=params)
            assert answer.status_code == 404 and "Version 1 is older than the memory keeps" in answer.text, path
            assert "its history starts at version" in answer.text
            assert_advice_in_page_terms(answer.text, "/")


async def test_a_refused_change_says_what_to_do_on_the_page(reader: httpx.AsyncClient, url: str) -> None:
    refused = await reader.post("/rollback?to=1", data={"token": TOKEN})
    assert refused.status_code == 403 and "read-only" in refused.text and "whoever started" in refused.text
    assert_advice_in_page_terms(refused.text, "/")
    async for writer in client_for(url, write=True):
        forged = await writer.post("/rollback?to=1", data={})
        assert forged.status_code == 403 and "open it from the file&#39;s history" in forged.text
        assert_advice_in_page_terms(forged.text, "/")


async def test_feed_errors_are_panels_for_htmx(reader: httpx.AsyncClient) -> None:
    answer = await reader.get("/file", params={"path": "/abs"}, headers={"HX-Request": "true"})
    assert answer.status_code == 400 and answer.text.startswith('<div class="error" role="alert">')


async def test_restore_needs_write_and_the_form_token(reader: httpx.AsyncClient, url: str) -> None:
    refused = await reader.post("/restore?path=notes/plan.md&version=1", data={"token": TOKEN})
    assert refused.status_code == 403 and "read-only" in refused.text
    async for writer in client_for(url, write=True):
        assert (await writer.post("/restore?path=notes/plan.md&version=1", data={})).status_code == 403
        unsaid = await writer.post("/restore?path=notes/plan.md&version=1", data={"token": TOKEN})
        assert unsaid.status_code == 400 and "open it again" in unsaid.text
        done = await writer.post("/restore?path=notes/plan.md&version=1", data={"token": TOKEN, "shown": "2"})
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
    assert 'name="shown" value="2"' in preview.text
    done = await writer.post("/rollback?to=1", data={"token": TOKEN, "shown": "2"})
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
        await writer.get("/static/times.js"),
        await writer.get("/static/absent.js"),  # 404 from the static files
        await writer.get("/nowhere"),  # 404 from the router
        await writer.get("/file", params={"path": "../x"}),  # a store error's page
        await writer.get("/file", params={"path": "../x"}, headers={"HX-Request": "true"}),  # its panel
        await writer.post("/rollback?to=1", data={}),  # no form token
        await writer.post("/rollback?to=1", data={"token": TOKEN}, headers={"Origin": "http://127.0.0.1:8"}),
        await writer.get(f"/?token={TOKEN}"),  # the redirect that sets the cookie
        await writer.get("/", headers={"Host": "attacker.example"}),  # refused for its Host
        # done: a redirect, then a page (each confirming the head it was shown)
        await writer.post("/restore?path=notes/plan.md&version=1", data={"token": TOKEN, "shown": "2"}),
        await writer.post("/rollback?to=1", data={"token": TOKEN, "shown": "3"}),
    ]
    writer.cookies.clear()
    answers.append(await writer.get("/"))  # refused for want of the token
    statuses = [answer.status_code for answer in answers]
    assert statuses == [200] * 4 + [204] + [200] * 7 + [404, 404, 400, 400, 403, 403, 303, 403, 303, 200, 403]
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
        ("/file", {"path": "notes/plan.md", "version": "1"}),
        ("/diff", {"path": "notes/plan.md", "from": "1", "to": "2"}),
        ("/feed", {}),
        ("/search", {"q": "ship"}),
        ("/records", {}),
        ("/restore", {"path": "notes/plan.md", "version": "1"}),
        ("/rollback", {"to": "1"}),
        ("/file", {"path": "../x"}),
        ("/diff", {"path": "notes/plan.md", "from": "99", "to": "now"}),
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
    form = {"token": TOKEN, "shown": "2"}
    done = await writer.post("/restore?path=notes/plan.md&version=1", data=form, headers=own_form)
    assert done.status_code == 303, "the page's own form, as a browser sends it"


async def test_a_diff_being_made_holds_up_no_other_page(
    reader: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While one diff is worked out (held here until the other page has answered), the tree still
    loads: diffs run off the event loop (difflib on the loop stalled every page for minutes)."""
    import asyncio
    import threading

    from bucket_memory.browser import diff
    from bucket_memory.diffs import LineDiff, line_diff

    started, release = threading.Event(), threading.Event()

    def held(before: str, after: str) -> LineDiff:
        started.set()
        release.wait()
        return line_diff(before, after)

    monkeypatch.setattr(diff, "line_diff", held)
    diffing = asyncio.create_task(reader.get("/diff", params={"path": "notes/plan.md", "from": "1", "to": "2"}))
    await asyncio.to_thread(started.wait)
    try:
        assert (await reader.get("/")).status_code == 200
    finally:
        release.set()
    assert "ship <ins>friday</ins>" in (await diffing).text


async def test_versions_link_to_their_text(writer: httpx.AsyncClient, url: str) -> None:
    history = (await writer.get("/file", params={"path": "notes/plan.md"})).text
    link = "/file?path=notes/plan.md&amp;version=1"
    assert f'<a href="{link}" aria-label="version 1">1</a>' in history
    assert link in (await writer.get("/")).text, "the feed links each version too"
    old = await writer.get(link.replace("&amp;", "&"))
    assert old.status_code == 200 and '<pre class="text">ship monday\n</pre>' in old.text
    assert "This is version 1. The file is at version 2 now." in old.text
    assert 'class="shown" aria-current="true"' in old.text, "its row in the history is marked"
    assert "/diff?path=notes/plan.md&amp;from=1&amp;to=now" in old.text
    assert "/restore?path=notes/plan.md&amp;version=1" in old.text
    now = (await writer.get("/file", params={"path": "notes/plan.md", "version": "2"})).text
    assert "ship friday" in now and "This is version" not in now, "the version it is at now is the file now"
    async with open_store(url) as store:
        await store.delete("notes/plan.md", expected="2", origin=Origin(principal_id="grace"))
    history = (await writer.get("/file", params={"path": "notes/plan.md"})).text
    assert "This file is deleted now" in history and "version=3" not in history, "a deletion has no text to link"
    after = (await writer.get(link.replace("&amp;", "&"))).text
    assert "ship monday" in after and "The file is deleted now." in after
    gone = await writer.get("/file", params={"path": "notes/plan.md", "version": "3"})
    assert gone.status_code == 404 and "notes/plan.md did not exist at version 3" in gone.text
    assert_advice_in_page_terms(gone.text, "/file?path=notes/plan.md")
    # The history's preselected diff ends at the deletion: every line shows as removed.
    diff = (await writer.get("/diff", params={"path": "notes/plan.md", "from": "2", "to": "3"})).text
    assert "The file did not exist at version 3: every line shows as removed." in diff
    assert '<tr class="removed"><td class="num">1</td>' in diff and "1 line removed, 0 added" in diff


async def test_read_only_pages_offer_no_change(reader: httpx.AsyncClient, url: str) -> None:
    def offers_change(page: str) -> list[str]:
        return re.findall(
            r'<form[^>]*method="post"[^>]*>|action="/rollback"|href="/restore|<button class="danger"', page
        )

    pages = [
        ("/", {}),
        ("/file", {"path": "notes/plan.md"}),
        ("/file", {"path": "notes/plan.md", "version": "1"}),
        ("/diff", {"path": "notes/plan.md", "from": "1", "to": "2"}),
        ("/restore", {"path": "notes/plan.md", "version": "1"}),
        ("/rollback", {"to": "1"}),
        ("/search", {"q": "ship"}),
        ("/records", {}),
    ]
    for path, params in pages:
        page = (await reader.get(path, params=params)).text
        assert offers_change(page) == [], (path, offers_change(page))
    assert "cannot restore" in (await reader.get("/restore", params=pages[4][1])).text
    assert "cannot roll back" in (await reader.get("/rollback", params=pages[5][1])).text
    # The same pages writable offer each change (the test above finds them).
    async for writer in client_for(url, write=True):
        offered = [offers_change((await writer.get(path, params=params)).text) for path, params in pages]
        assert [bool(found) for found in offered] == [True, True, True, False, True, True, False, False], offered


@pytest.mark.parametrize("url", ["local"], indirect=True)
async def test_times_read_how_long_ago_with_the_exact_time_on_hover(url: str) -> None:
    async with open_store(url) as store:
        (newest, *_) = await MemoryAdmin(store).revisions()
    written = datetime.fromisoformat(newest.time)
    app = browser_app(url, token=TOKEN, host=HOST, writable=False, origin=Origin())
    inner = starlette_of(app)
    async with inner.router.lifespan_context(inner):
        inner.state.browser.clock = lambda: written + timedelta(minutes=3, seconds=5)
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url=f"http://{HOST}") as client:
            client.cookies.set("bucket_memory_browse", TOKEN)
            pages = [(await client.get(path)).text for path in ("/", "/file?path=notes/plan.md")]
    stamp = written.isoformat(timespec="milliseconds").replace("+00:00", "Z")
    title = written.strftime("%Y-%m-%d %H:%M:%S UTC")
    for page in pages:
        assert f'<time class="ago" datetime="{stamp}" title="{title}">3 min ago</time>' in page


def test_how_long_ago_reads() -> None:
    now = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)
    cases = {
        timedelta(0): "just now",
        timedelta(seconds=59.9): "just now",
        timedelta(seconds=-59): "just now",  # a writer's clock a little ahead
        timedelta(seconds=60): "1 min ago",
        timedelta(minutes=59, seconds=59): "59 min ago",
        timedelta(hours=1): "1 h ago",
        timedelta(hours=23, minutes=59): "23 h ago",
        timedelta(days=1): "1 day ago",
        timedelta(days=29, hours=23): "29 days ago",
        timedelta(days=30): "2026-11-02",
        timedelta(minutes=-5): "in 5 min",
    }
    assert {before: ago(now - before, now) for before in cases} == cases
    assert str(time_element("not a time", now)) == "not a time"
    assert str(time_element("<b>", now)) == "&lt;b&gt;"
    assert time_element(None, now) == ""


async def test_a_change_made_after_the_confirmation_was_shown_is_refused(writer: httpx.AsyncClient, url: str) -> None:
    """What the confirmation showed is exactly what is done: a commit landing between the preview
    and the click makes the click refused, with nothing changed and a link to see it anew."""
    for confirm, change in (
        ("/restore?path=notes/plan.md&version=1", "/restore?path=notes/plan.md&version=1"),
        ("/rollback?to=1", "/rollback?to=1"),
    ):
        page = await writer.get(confirm)
        shown = page.text.split('name="shown" value="', 1)[1].split('"', 1)[0]
        async with open_store(url) as store:
            current = await store.read("notes/plan.md")
            await store.write("notes/plan.md", current.text + "and more\n", expected=current.version, origin=Origin())
        refused = await writer.post(change, data={"token": TOKEN, "shown": shown})
        assert refused.status_code == 409 and "changed since the preview" in refused.text, refused.text[-500:]
        async with open_store(url) as store:
            assert (await store.read("notes/plan.md")).text.endswith("and more\n"), "nothing was changed"


async def test_a_record_is_shown_as_a_record_not_its_json(url: str) -> None:
    """A record memory's file reads as its text, time and vector's model, with the stored JSON (and
    its base64 vector) folded away; markup in a record is text."""
    from pydantic_ai import Embedder

    from bucket_memory import LogRecordStore
    from bucket_memory.testing.embeddings import HashingEmbeddingModel

    async with open_store(url) as store:
        records = LogRecordStore(store, embedder=Embedder(HashingEmbeddingModel()))
        made = await records.add("<b>green tea</b> at standup")
    async for reader in client_for(url, write=False):
        page = await reader.get("/file", params={"path": f"{made.id}.json"})
        assert page.status_code == 200
        before_details = page.text.split("<details>", 1)[0]
        assert "&lt;b&gt;green tea&lt;/b&gt; at standup" in before_details and "<b>green" not in page.text
        assert "a record, written" in before_details and '"updated_at"' not in before_details
        assert "a vector of 64 dimensions by" in before_details
        assert "The file as stored" in page.text


async def test_records_are_searched_by_meaning_with_the_embedder_browse_was_given(url: str) -> None:
    """Issue 45: `browse --embedder` ranks the records page's search with that model: the records
    stored without its vectors are embedded for the search (a read-only browser writes nothing)."""
    from pydantic_ai import Embedder

    from bucket_memory import LogRecordStore
    from bucket_memory.testing.embeddings import HashingEmbeddingModel

    async with open_store(url) as store:
        plain = LogRecordStore(store)
        tea = await plain.add("green tea at standup")
        await plain.add("deploys happen on tuesdays")
    model = HashingEmbeddingModel()
    async for reader in client_for(url, write=False, embedder=Embedder(model)):
        page = (await reader.get("/records", params={"q": "green tea"})).text
        assert tea.id in page
    assert sorted(set(model.embedded) - {"green tea"}) == ["deploys happen on tuesdays", "green tea at standup"]


async def test_a_read_only_browser_embeds_each_record_once_across_page_loads(url: str) -> None:
    """Issue 54: the records page made a record store per request, so a read-only browser embedded
    every record stored without a vector again at every search (301 texts a page load for 300)."""
    from pydantic_ai import Embedder

    from bucket_memory import LogRecordStore
    from bucket_memory.testing.embeddings import HashingEmbeddingModel

    async with open_store(url) as store:
        plain = LogRecordStore(store)
        for n in range(5):
            await plain.add(f"note {n} about green tea")
    model = HashingEmbeddingModel()
    async for reader in client_for(url, write=False, embedder=Embedder(model)):
        for query in ("green tea", "tea notes", "note"):
            assert (await reader.get("/records", params={"q": query})).status_code == 200
    assert len(model.embedded) == 5 + 3, "each record once in the process, and a query a page"


def test_browse_refuses_an_embedder_it_cannot_use(tmp_path: Path) -> None:
    from .helpers import cli

    memory = tmp_path / "memory"
    cli("put", str(memory), "a.md", given="x\n")
    refused = cli("browse", str(memory), "--no-open", "--embedder", "unknownprovider:model", expect=2)
    assert "--embedder" in refused and "Unknown provider" in refused


@pytest.mark.parametrize(
    ("vector", "says"),
    [
        ("A", "a vector by m that does not decode"),  # not base64 a decoder takes: was a 500
        ("AAA", "a vector by m that does not decode"),
        ("AA==", "a vector by m that does not decode"),  # one byte: was shown as refused
        ("", "refused by m (searched by words)"),
        ("AAAAAA==", "a vector of 2 dimensions by m"),
    ],
)
async def test_a_records_stored_vector_is_shown_for_what_it_is(url: str, vector: str, says: str) -> None:
    """A writer with PutObject may store any base64 as a record's vector: the page says what it is
    (the search treats one that does not decode as missing) and never fails."""
    from bucket_memory.format.wire_values import time_text
    from bucket_memory.records.record_format import Embedding, RecordBody

    body = RecordBody("green tea", time_text(1.7e9), (Embedding("m", vector),))
    path = "ab" * 16 + ".json"
    async with open_store(url) as store:
        await store.write(path, body.encode(), expected=None, origin=Origin(principal_id="mallory"))
    async for reader in client_for(url, write=False):
        page = await reader.get("/file", params={"path": path})
        assert page.status_code == 200 and says in page.text.split("<details>", 1)[0]


async def test_erased_versions_are_shown_erased_without_a_link(writer: httpx.AsyncClient, url: str) -> None:
    if url.startswith("gs://"):
        pytest.skip("the GCS emulator archives live objects when asked to delete old versions (see test_erase)")
    async with open_store(url) as store:
        await MemoryAdmin(store).erase("notes/plan.md", origin=Origin(run_id="bucket-memory erase", principal_id="dpo"))
    history = (await writer.get("/file", params={"path": "notes/plan.md"})).text
    assert history.count("(erased by commit 3)") == 2
    assert "version=1" not in history and "restore?path" not in history, "no link to a text that is gone"
    assert "ship monday" not in history and "ship friday" not in history
    assert "texts were erased: no version can bring it back" in history and "brings it back" not in history.replace(
        "can bring it back", ""
    ), "the page never promises a restore that cannot be"
    feed = (await writer.get("/")).text
    assert "(erased by commit 3)" in feed and "/file?path=notes/plan.md&amp;version=1" not in feed
    old = await writer.get("/file", params={"path": "notes/plan.md", "version": "1"})
    assert old.status_code == 404 and "was erased by commit 3" in old.text
