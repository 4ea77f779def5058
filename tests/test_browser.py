"""The memory browser end to end: `bucket-memory browse` as its own process on a moto-backed memory,
driven by Playwright in Debian's headless Chromium. With BUCKET_MEMORY_SCREENSHOTS set to a
folder (`make screenshots` sets docs/img), the tests save every view there for the docs, 1280
and 390 px wide."""

from __future__ import annotations

import asyncio
import concurrent.futures
import http.server
import os
import re
import shutil
import subprocess
import sys
import threading
from collections.abc import Awaitable, Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest
from a13n_harness.providers.memory import Origin
from playwright.sync_api import Browser, Page, expect, sync_playwright

from bucket_memory import LogFileStore, MemoryAdmin, open_store
from bucket_memory.browser.times import ago, exact
from bucket_memory.records.store import LogRecordStore

from .conftest import BUCKET, unique_prefix

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
COMMAND = str(Path(sys.executable).with_name("bucket-memory"))
# What the probe of this machine kind found Chromium needs offline (see the env notes).
CHROMIUM_FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

if not Path(CHROMIUM).exists():
    pytest.skip(
        "Debian's chromium is not installed: `make test` installs it (apt-get install chromium)",
        allow_module_level=True,
    )


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with sync_playwright() as driver:
        launched = driver.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS)
        yield launched
        launched.close()


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    yield context.new_page()
    context.close()


def written(url: str, steps: Callable[[LogFileStore], Awaitable[None]]) -> None:
    """Run `steps` on the memory, as another writer would: in a thread of its own, since Playwright's
    sync API keeps an event loop running in this one."""

    async def run() -> None:
        async with open_store(url) as store:
            await steps(store)

    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        pool.submit(asyncio.run, run()).result()


@pytest.fixture
def memory(s3_endpoint: str) -> str:
    """A memory on moto with a file written twice by an agent's tool calls, and one more file."""
    url = f"s3://{BUCKET}/{unique_prefix()}"

    async def seed(store: LogFileStore) -> None:
        agent = Origin(run_id="run-7", principal_id="agent-ada", tool_call_id="call-1")
        first = await store.write(
            "notes/plan.md", "---\ndescription: The release plan\n---\nship on monday\n", expected=None, origin=agent
        )
        later = Origin(run_id="run-8", principal_id="agent-grace", tool_call_id="call-9")
        await store.write(
            "notes/plan.md", "---\ndescription: The release plan\n---\nship on friday\n", expected=first, origin=later
        )
        await store.write("team.md", "blue team\n", expected=None, origin=agent)

    written(url, seed)
    return url


class Served:
    """A running `bucket-memory browse`: its link (with the token) and its base address."""

    def __init__(self, url: str, *, write: bool) -> None:
        arguments = [COMMAND, "browse", url, "--no-open", *(["--write"] if write else [])]
        self.process = subprocess.Popen(
            arguments, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env={**os.environ, "COLUMNS": "400"}
        )
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        found = re.search(r"(http://127\.0\.0\.1:\d+)/\?token=(\S+)", line)
        assert found, f"browse printed {line!r}"
        self.base, self.token = found[1], found[2]
        self.link = f"{self.base}/?token={self.token}"

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=30)


@pytest.fixture
def serve() -> Iterator[Callable[..., Served]]:
    running: list[Served] = []

    def start(url: str, *, write: bool = False) -> Served:
        running.append(Served(url, write=write))
        return running[-1]

    yield start
    for served in running:
        served.stop()


@pytest.fixture
def lure() -> Iterator[Callable[[str], str]]:
    """Serves pages from another port of 127.0.0.1: another origin than the browser's, but the same
    site, so its requests carry the browser's SameSite cookie. Gives each page's address."""
    pages: dict[str, bytes] = {}

    class Pages(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = pages.get(self.path)
            if body is None:
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *arguments: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Pages)
    thread = threading.Thread(target=server.serve_forever)
    thread.start()

    def host(html: str) -> str:
        name = f"/{len(pages)}.html"
        pages[name] = html.encode()
        return f"http://127.0.0.1:{server.server_port}{name}"

    yield host
    server.shutdown()
    server.server_close()
    thread.join()


# The widths the views are checked and shown at: a laptop's, and a phone's.
WIDE, NARROW = 1280, 390


def shot(page: Page, name: str) -> None:
    """Save the view as it is now for the docs when BUCKET_MEMORY_SCREENSHOTS names a folder."""
    if folder := os.environ.get("BUCKET_MEMORY_SCREENSHOTS"):
        width = page.viewport_size["width"] if page.viewport_size else WIDE
        page.screenshot(path=str(Path(folder) / f"browser-{name}-{width}.png"), full_page=True)


def shots(page: Page, name: str) -> None:
    """Save the view at both widths (the page laid out again at each), then back at the first."""
    if os.environ.get("BUCKET_MEMORY_SCREENSHOTS"):
        size = page.viewport_size or {"width": WIDE, "height": 800}
        for width in (WIDE, NARROW):
            page.set_viewport_size({"width": width, "height": size["height"]})
            shot(page, name)
        page.set_viewport_size(size)


def test_tree_history_and_diff(memory: str, serve: Callable[..., Served], page: Page) -> None:
    served = serve(memory)
    page.goto(served.link)
    assert "token=" not in page.url, "the token leaves the address bar for a cookie"
    tree = page.locator("ul.tree").first
    expect(tree).to_contain_text("plan.md")
    expect(tree).to_contain_text("The release plan")
    expect(page.locator(".mode")).to_have_text("read-only")
    # Keyboard: the file's link takes focus, shows it, and Enter opens it.
    link = page.get_by_role("link", name="plan.md", exact=True)
    link.focus()
    outline = link.evaluate("element => getComputedStyle(element).outlineStyle")
    assert outline != "none", "a focused link is visibly marked"
    page.keyboard.press("Enter")
    expect(page.locator("h1")).to_have_text("notes/plan.md")
    history = page.locator("table tbody tr")
    expect(history).to_have_count(2)
    expect(history.nth(0)).to_contain_text("agent-grace")
    expect(history.nth(0)).to_contain_text("run-8")
    expect(history.nth(0)).to_contain_text("call-9")
    expect(history.nth(1)).to_contain_text("agent-ada")
    assert page.get_by_role("link", name="restore this version").count() == 0, "read-only: no restore"
    page.get_by_label("diff from version 1").check()
    page.get_by_label("diff to version 2").check()
    page.get_by_role("button", name="Show the diff").click()
    removed, added = page.locator("table.diff tr.removed"), page.locator("table.diff tr.added")
    expect(removed.locator("td.code")).to_have_text("ship on monday")
    expect(removed.locator("del")).to_have_text("monday")
    expect(added.locator("td.code")).to_have_text("ship on friday")
    expect(added.locator("ins")).to_have_text("friday")
    expect(removed.locator("td.num").first).to_have_text("4")  # the line's number before
    expect(added.locator("td.num").last).to_have_text("4")  # and after
    # The version is a link to its text.
    page.get_by_role("link", name="version 1").click()
    expect(page.locator("pre.text")).to_contain_text("ship on monday")
    expect(page.locator(".notice")).to_contain_text("This is version 1. The file is at version 2 now.")


def test_without_write_nothing_can_change(memory: str, serve: Callable[..., Served], page: Page) -> None:
    served = serve(memory)
    page.goto(served.link)
    page.goto(f"{served.base}/restore?path=notes/plan.md&version=1")
    expect(page.locator(".notice")).to_contain_text("read-only")
    assert page.get_by_role("button", name=re.compile("Restore")).count() == 0
    # Even a forged POST carrying the cookie and the token is refused, and nothing changes.
    for path in ("/restore?path=notes/plan.md&version=1", "/rollback?to=1"):
        answer = page.request.post(f"{served.base}{path}", form={"token": served.token})
        assert answer.status == 403 and "read-only" in answer.text()

    async def head(store: LogFileStore) -> None:
        assert (await store.read("notes/plan.md")).version == "2"
        assert sorted(entry.path for entry in await store.list()) == ["notes/plan.md", "team.md"]

    written(memory, head)


def test_a_request_without_the_token_is_refused(memory: str, serve: Callable[..., Served], page: Page) -> None:
    served = serve(memory, write=True)
    for path in ("/", "/file?path=team.md", "/feed", "/static/htmx.min.js"):
        answer = httpx.get(f"{served.base}{path}")
        assert answer.status_code == 403 and "token" in answer.text
    assert httpx.get(f"{served.base}/?token=wrong").status_code == 403
    assert httpx.get(served.link, headers={"Host": "attacker.example"}).status_code == 403, "DNS rebinding"
    page.goto(served.link)
    # With the cookie but without the page's form token (a cross-site form), a change is refused.
    tokenless = page.request.post(f"{served.base}/restore?path=notes/plan.md&version=1", form={})
    assert tokenless.status == 403
    cross_site = page.request.post(
        f"{served.base}/restore?path=notes/plan.md&version=1",
        form={"token": served.token},
        headers={"Origin": "http://attacker.example"},
    )
    assert cross_site.status == 403


def test_restore_with_write_makes_a_new_commit(memory: str, serve: Callable[..., Served], page: Page) -> None:
    served = serve(memory, write=True)
    page.goto(served.link)
    expect(page.locator(".mode")).to_have_text("writable")
    page.get_by_role("link", name="plan.md", exact=True).click()
    page.get_by_role("link", name="restore this version").nth(1).click()
    expect(page.locator("h1")).to_have_text("Restore notes/plan.md to version 1?")
    expect(page.locator("table.diff tr.added td.code")).to_have_text("ship on monday")
    page.get_by_role("button", name="Restore version 1").click()
    expect(page.locator(".notice")).to_contain_text("now version 4")
    expect(page.locator("pre").first).to_contain_text("ship on monday")
    newest = page.locator("table tbody tr").nth(0)
    expect(newest).to_contain_text("bucket-memory browse")

    async def check(store: LogFileStore) -> None:
        current = await store.read("notes/plan.md")
        assert current.version == "4" and "ship on monday" in current.text

    written(memory, check)


def test_rollback_with_write_shows_its_changes_first(memory: str, serve: Callable[..., Served], page: Page) -> None:
    served = serve(memory, write=True)
    page.goto(served.link)
    page.get_by_label("to commit").fill("1")
    page.get_by_role("button", name="Show what it changes").click()
    expect(page.locator("main")).to_contain_text("Written back (1)")
    expect(page.locator("main")).to_contain_text("Deleted (1)")
    page.get_by_role("button", name="Roll back to commit 1").click()
    expect(page.locator(".notice")).to_contain_text("as new commit 4")

    async def check(store: LogFileStore) -> None:
        assert [entry.path for entry in await store.list()] == ["notes/plan.md"]
        assert "ship on monday" in (await store.read("notes/plan.md")).text

    written(memory, check)


def test_a_change_by_another_process_appears_without_a_reload(
    memory: str, serve: Callable[..., Served], page: Page
) -> None:
    served = serve(memory)
    page.goto(served.link)
    feed = page.locator("#feed")
    expect(feed).to_contain_text("team.md")
    page.evaluate("window.marker = 'same page'")
    subprocess.run([COMMAND, "put", memory, "notes/late.md"], input="written elsewhere\n", text=True, check=True)
    expect(feed.locator("tr.fresh")).to_contain_text("notes/late.md", timeout=20_000)
    expect(page.locator("#files")).to_contain_text("late.md")  # the tree was swapped in with it
    assert page.evaluate("window.marker") == "same page", "the feed changed in place, not by a reload"
    shots(page, "feed")


def test_search_records_and_errors_are_pages(memory: str, serve: Callable[..., Served], page: Page) -> None:
    records_url = f"{memory}-records"

    async def add(store: LogFileStore) -> None:
        await LogRecordStore(store).add("the build runs on friday nights")

    written(records_url, add)
    served = serve(memory)
    page.goto(served.link)
    page.get_by_label("Search").fill("FRIDAY")
    page.keyboard.press("Enter")
    expect(page.locator("main table")).to_contain_text("notes/plan.md")
    expect(page.locator("main table")).to_contain_text("ship on friday")
    page.goto(f"{served.base}/file?path=../../etc/passwd")
    expect(page.locator("[role=alert]")).to_contain_text("not the name of a file in this memory")
    page.goto(f"{served.base}/diff?path=notes/plan.md&from=99&to=now")
    expect(page.locator("[role=alert]")).to_contain_text("There is no version 99 yet")
    expect(page.locator("header")).to_be_visible()
    page.get_by_role("link", name="See the history of notes/plan.md").click()
    expect(page.locator("h1")).to_have_text("notes/plan.md")
    other = serve(records_url)
    page.goto(other.link)
    page.get_by_role("link", name="see them as records").click()
    expect(page.locator("main table")).to_contain_text("the build runs on friday nights")
    page.get_by_label("Recall records like").fill("build")
    page.get_by_role("button", name="Recall").click()
    expect(page.locator("main table")).to_contain_text("the build runs on friday nights")


# The two confirmations a lured click or a forged request would complete.
CONFIRMATIONS = {
    "rollback": ("/rollback?to=1", "Roll back to commit 1"),
    "restore": ("/restore?path=notes/plan.md&version=1", "Restore version 1"),
}


def unchanged(memory: str) -> None:
    async def check(store: LogFileStore) -> None:
        assert (await store.read("notes/plan.md")).version == "2"
        assert sorted(entry.path for entry in await store.list()) == ["notes/plan.md", "team.md"]
        assert len(await MemoryAdmin(store).revisions()) == 3, "no commit was added"

    written(memory, check)


@pytest.mark.parametrize("confirmation", CONFIRMATIONS)
def test_a_page_on_another_port_cannot_frame_a_confirmation(
    memory: str, serve: Callable[..., Served], page: Page, lure: Callable[[str], str], confirmation: str
) -> None:
    """The attack of issue 27: a page frames the confirmation where its own bait is and lures the
    one click that completes it."""
    path, button = CONFIRMATIONS[confirmation]
    served = serve(memory, write=True)
    page.goto(served.link)  # signed in: the SameSite cookie goes with the framed request too
    confirm_at = f"{served.base}{path}"
    page.goto(confirm_at)  # the attacker knows the layout: where the button is on the page
    box = page.get_by_role("button", name=button).bounding_box()
    assert box is not None
    refusals: list[str] = []
    page.on("console", lambda message: refusals.append(message.text))
    frame = f'<iframe src="{confirm_at}" width="1280" height="800" onload="document.title = \'loaded\'"></iframe>'
    page.goto(lure(f"<style>body {{ margin: 0 }} iframe {{ border: 0 }}</style>{frame}"))
    expect(page).to_have_title("loaded")
    page.mouse.click(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)  # where the button would be
    (framed,) = page.main_frame.child_frames
    assert framed.url.startswith("chrome-error://"), f"the confirmation loaded in the frame: {framed.url}"
    assert framed.get_by_role("button").count() == 0
    assert any("frame-ancestors" in text for text in refusals), refusals
    unchanged(memory)


@pytest.mark.parametrize("confirmation", CONFIRMATIONS)
def test_a_page_on_another_port_cannot_post_a_confirmation(
    memory: str, serve: Callable[..., Served], page: Page, lure: Callable[[str], str], confirmation: str
) -> None:
    """A script on another port sends the change three ways: by fetch with its Origin, by fetch
    with no referrer (Origin: null, as the browser's own forms send), then by submitting a form.
    Each carries the cookie (same site) but not the form token, which the script cannot read."""
    path, _ = CONFIRMATIONS[confirmation]
    served = serve(memory, write=True)
    page.goto(served.link)
    target = f"{served.base}{path}"
    send = 'method: "POST", mode: "no-cors", credentials: "include", body: new URLSearchParams({token: "guess"})'
    page.goto(
        lure(
            f'<form id="change" method="post" action="{target}"><input name="token" value="guess"></form>\n'
            f'<script>fetch("{target}", {{{send}}})'
            f'.then(() => fetch("{target}", {{{send}, referrerPolicy: "no-referrer"}}))'
            '.finally(() => document.getElementById("change").submit());</script>'
        )
    )
    expect(page.locator("body")).to_have_text("A change must come from the browser's own page.")
    unchanged(memory)


def test_every_view_works_under_its_content_security_policy(
    memory: str, serve: Callable[..., Served], page: Page
) -> None:
    """No inline script or style is refused, the stylesheet and htmx load, and htmx injects no styles."""
    served = serve(memory, write=True)
    console: list[str] = []
    page.on("console", lambda message: console.append(message.text))
    failures: list[str] = []
    page.on("pageerror", lambda error: failures.append(str(error)))
    page.goto(served.link)
    assert page.evaluate("getComputedStyle(document.querySelector('header')).backgroundColor") == "rgb(255, 255, 255)"
    assert page.evaluate("htmx.config.includeIndicatorStyles") is False
    assert page.evaluate("document.querySelectorAll('style').length") == 0, "no <style>: the policy refuses it"
    for path in [
        "/file?path=notes/plan.md",
        "/diff?path=notes/plan.md&from=1&to=2",
        "/search?q=ship",
        "/records",
        *(path for path, _ in CONFIRMATIONS.values()),
        "/file?path=../x",
    ]:
        page.goto(f"{served.base}{path}")
        expect(page.locator("header")).to_have_css("background-color", "rgb(255, 255, 255)")
    assert [text for text in console if "Content Security Policy" in text] == [] and failures == []


LONG_PATH = "projects/infrastructure/terraform-modules/network/readme.md"
ROLE = "arn:aws:sts::123456789012:assumed-role/agent-runner/ada"


@pytest.fixture
def lived_in(memory: str) -> str:
    """The memory with a longer history: a file of many lines changed in two places, a deep path, a
    deleted file, and an agent known by its role's long ARN; and a memory of records beside it."""

    async def more(store: LogFileStore) -> None:
        role = Origin(run_id="run-12", principal_id=ROLE, tool_call_id="call-31")
        steps = "".join(f"{n}. step {n} of the release\n" for n in range(1, 16))
        head = "---\ndescription: The release plan\n---\n"
        version = (await store.read("notes/plan.md")).version
        version = await store.write(
            "notes/plan.md", f"{head}ship on friday\nowner: grace\n{steps}", expected=version, origin=role
        )
        await store.write(
            "notes/plan.md",
            f"{head}ship on friday, after the review\nowner: ada\n{steps.replace('step 14', 'check 14')}",
            expected=version,
            origin=role,
        )
        await store.write(LONG_PATH, "the network module\n", expected=None, origin=role)
        scratch = await store.write("scratch.md", "draft\n", expected=None, origin=role)
        await store.delete("scratch.md", expected=scratch, origin=role)

    async def add(store: LogFileStore) -> None:
        records = LogRecordStore(store)
        for text in ("the build runs on friday nights", "grace owns the release", "ada reviews the plan"):
            await records.add(text)

    written(memory, more)
    written(f"{memory}-records", add)
    return memory


# Every view, by name: its address and what shows it loaded.
VIEWS = {
    "files": ("/", "Changes, newest first"),
    "history": ("/file?path=notes/plan.md", "History"),
    "version": ("/file?path=notes/plan.md&version=2", "This is version 2"),
    "diff": ("/diff?path=notes/plan.md&from=2&to=now", "removed, 17 added"),
    "restore": ("/restore?path=notes/plan.md&version=2", "Restore version 2"),
    "rollback": ("/rollback?to=3", "Roll back to commit 3"),
    "search": ("/search?q=release", "Lines matching"),
    "error": ("/diff?path=notes/plan.md&from=99&to=now", "There is no version 99 yet"),
}

# What of a laid-out page would make it hard to read, as a list of complaints: a page wider than
# the window, a box whose table must scroll sideways, a time broken over lines, a name in a path
# broken inside (the pages show each part of a path, up to a /, as a span.part).
LAYOUT_PROBLEMS = r"""() => {
  const problems = [];
  const page = document.documentElement;
  if (page.scrollWidth > page.clientWidth) problems.push(`page ${page.scrollWidth} px wide`);
  for (const box of document.querySelectorAll(".scroll"))
    if (box.scrollWidth > box.clientWidth + 1) problems.push(`a table scrolls: ${box.scrollWidth} px`);
  for (const time of document.querySelectorAll("time"))
    if (time.getClientRects().length !== 1) problems.push(`time over lines: ${time.textContent}`);
  for (const part of document.querySelectorAll(".part")) {
    const range = document.createRange();
    range.selectNodeContents(part);
    const lines = new Set([...range.getClientRects()].map(rect => Math.round(rect.top)));
    if (lines.size > 1) problems.push(`a name broken over lines: ${part.textContent}`);
  }
  return problems;
}"""


@pytest.mark.parametrize("width", [WIDE, pytest.param(NARROW, marks=pytest.mark.slow)])
def test_every_view_reads_at_a_laptop_and_a_phone_width(
    lived_in: str, serve: Callable[..., Served], browser: Browser, width: int
) -> None:
    served = serve(lived_in, write=True)
    context = browser.new_context(viewport={"width": width, "height": 800})
    page = context.new_page()
    page.goto(served.link)
    for name, (path, shows) in VIEWS.items():
        page.goto(f"{served.base}{path}")
        expect(page.locator("main")).to_contain_text(shows)
        assert page.evaluate(LAYOUT_PROBLEMS) == [], name
        shot(page, name)
    page.goto(f"{served.base}/")
    boxes = [item.bounding_box() for item in page.locator("header > *").all()]
    middles = [box["y"] + box["height"] / 2 for box in boxes if box]
    files, feed = page.locator("#files").bounding_box(), page.locator("#feed").bounding_box()
    history = f"{served.base}/file?path=notes/plan.md"
    if width == WIDE:
        assert len(middles) == 5 and max(middles) - min(middles) < 4, f"the header is one row: {middles}"
        assert files and feed and feed["x"] > files["x"] + files["width"], "the files and the feed side by side"
        assert feed["width"] > 0.6 * width, "the feed has most of the width"
        heights = [box["height"] for box in (row.bounding_box() for row in page.locator("#feed tbody tr").all()) if box]
        line = heights[-1]  # the first change: short names, one line
        assert heights[-3:] == [line] * 3 and line < 40, heights
        assert max(heights) < 3.5 * line, f"the longest path and principal take at most three lines: {heights}"
        page.goto(history)
        assert page.locator("table.history thead").is_visible(), "a table with its headings"
    else:
        assert files and feed and feed["y"] > files["y"] + files["height"], "the feed below the files"
        page.goto(history)
        rows = page.locator("table.history tbody tr")
        assert rows.count() == 4 and rows.first.evaluate("row => getComputedStyle(row).display") == "flex"
        for n in range(rows.count()):  # each version a block of its own, all of it on the screen
            for cell in rows.nth(n).locator("td").all():
                box = cell.bounding_box()
                assert box is None or box["x"] + box["width"] <= width, cell.inner_text()
        by = rows.first.locator("td.by")
        expect(by).to_have_text("agent-runner/ada")  # the name in the ARN's resource, on one line
        expect(by.locator("span")).to_have_attribute("title", ROLE)  # the whole ARN on hover
        box = by.locator("span").bounding_box()
        assert box is not None and box["height"] < 2 * 24, "the principal on one line"
        expect(rows.first.locator("td.pick").first).to_be_visible()
    # Last: the records' browser's cookie takes the place of the first's (cookies do not tell ports apart).
    records = serve(f"{lived_in}-records")
    page.goto(records.link)
    page.goto(f"{records.base}/records")
    expect(page.locator("main table")).to_contain_text("grace owns the release")
    assert page.evaluate(LAYOUT_PROBLEMS) == [], "records"
    shot(page, "records")
    context.close()


def test_times_say_how_long_ago_and_stay_true_while_the_page_is_open(
    memory: str, serve: Callable[..., Served], page: Page
) -> None:
    """The server writes each time's label; the page's own script rewrites it by the same rule as the
    page stays open. The page's clock is Playwright's: moved on, the labels follow it exactly."""
    served = serve(memory)
    page.clock.install()
    page.goto(served.link)
    times = page.locator("#feed time.ago")
    expect(times).to_have_count(3)
    for seconds in (90, 2 * 3600, 3 * 86400, 40 * 86400):  # on past a minute, 2 h, 3 days, 43 days
        page.clock.fast_forward(seconds * 1000)
        now = datetime.fromtimestamp(page.evaluate("Date.now()") / 1000, UTC)
        for time in times.all():
            then = datetime.fromisoformat(time.get_attribute("datetime") or "")
            assert time.get_attribute("title") == exact(then)
            expect(time).to_have_text(ago(then, now))
    expect(times.first).to_have_text(re.compile(r"^\d{4}-\d\d-\d\d$"))  # past 30 days, the date
