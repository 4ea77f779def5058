"""Issue 56: a command stopped by Ctrl-C, or whose reader went away, ends as documented. Ctrl-C
during an S3 `import` is exit 130 with one line saying what landed, at whatever point it comes (a
fault proxy in front of moto sends it when it sees the request, and holds that request, so the
timing is the test's, not the machine's); a closed pipe is exit 141, silently, never 1 ("found
nothing")."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import sys
import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from a13n_harness.providers.memory import Origin

from bucket_memory.testing.proxy import Fault, fault_proxy

from .conftest import VERSIONED
from .helpers import cli

COMMAND = str(Path(sys.executable).with_name("bucket-memory"))


@contextmanager
def proxied(upstream: str, plan: Callable[[int, str, str], Fault | None]) -> Iterator[str]:
    """A fault proxy in front of `upstream`, served by a loop of its own thread; yields its URL."""
    url: list[str] = []
    ready, stop = threading.Event(), threading.Event()

    async def serve() -> None:
        async with fault_proxy(upstream, plan) as (proxy_url, _):
            url.append(proxy_url)
            ready.set()
            await asyncio.to_thread(stop.wait)

    thread = threading.Thread(target=asyncio.run, args=(serve(),), daemon=True)
    thread.start()
    ready.wait()
    try:
        yield url[0]
    finally:
        stop.set()
        thread.join()


def _interrupted_import(s3_endpoint: str, tmp_path: Path, choose: Callable[[str, str], Fault | None]) -> str:
    """Import 40 files through a proxy whose `choose(method, path)` picks the request to interrupt
    at: SIGINT is sent as it arrives, and it is held unanswered. What the command printed."""
    folder = tmp_path / "notes"
    folder.mkdir()
    for number in range(40):
        (folder / f"note-{number}.md").write_text(f"note {number}\n")
    process: list[subprocess.Popen[str]] = []
    chosen: list[Fault] = []

    def plan(number: int, method: str, path: str) -> Fault | None:
        if chosen:  # interrupted: no more writes land, the reads that check what did pass
            return None if method in ("GET", "HEAD") else "never_answers"
        fault = choose(method, path)
        if fault == "never_answers":
            chosen.append(fault)
            process[0].send_signal(signal.SIGINT)
        return fault

    url = f"s3://{VERSIONED}/interrupt-{uuid.uuid4().hex[:8]}"
    with proxied(s3_endpoint, plan) as proxy_url:
        environment = {**os.environ, "AWS_ENDPOINT_URL": proxy_url}
        words = [COMMAND, "import", url, str(folder), "--principal", "tester"]
        process.append(
            subprocess.Popen(words, stderr=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=environment)
        )
        _, stderr = process[0].communicate(timeout=120)
    assert process[0].returncode == 130, stderr
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in stderr, stderr
    return lines[0] + "\n" + url


def test_ctrl_c_before_the_commit_says_nothing_was_changed(s3_endpoint: str, tmp_path: Path) -> None:
    said, url = _interrupted_import(
        s3_endpoint, tmp_path, lambda method, path: "never_answers" if method == "PUT" else None
    ).split("\n")
    assert said == "interrupted: nothing was changed"
    cli("ls", url, expect=4)  # no commit of it is there


def test_ctrl_c_once_the_commit_landed_names_it(s3_endpoint: str, tmp_path: Path) -> None:
    landed: list[str] = []

    def choose(method: str, path: str) -> Fault | None:
        if landed:
            return "never_answers"  # the retry, or the read that looks for the commit: interrupted there
        if method == "PUT" and re.search(r"/log/\d{20}\.json", path):
            landed.append(path)
            return "lose_reply"  # it lands; the importer never hears so
        return None

    said, url = _interrupted_import(s3_endpoint, tmp_path, choose).split("\n")
    found = re.fullmatch(r"interrupted after commit (\d+) landed \(`bucket-memory log (\S+)` shows it\)", said)
    assert found and found[2] == url, said
    log = json.loads(cli("log", url, "--json"))
    assert {entry["version"] for entry in log} == {found[1]} and len(log) == 40


@pytest.mark.parametrize(
    "words",
    [("grep", "note"), ("cat", "notes/a.md"), ("ls", "--json"), ("log",)],
    ids=["grep", "cat", "ls-json", "log"],
)
def test_a_closed_pipe_is_exit_141_and_silent(words: tuple[str, ...], tmp_path: Path) -> None:
    url = str(tmp_path / "memory")
    cli("put", url, "notes/a.md", given="".join(f"note {n}\n" for n in range(2000)))
    reader, writer = os.pipe()
    os.close(reader)  # the reader is gone before anything is written: `| head -0`, deterministically
    try:
        done = subprocess.run([COMMAND, words[0], url, *words[1:]], stdout=writer, stderr=subprocess.PIPE, timeout=120)
    finally:
        os.close(writer)
    assert (done.returncode, done.stderr) == (141, b"")


def test_ctrl_c_while_an_intent_is_pending_says_the_write_may_still_land(s3_endpoint: str) -> None:
    """A put whose commit lost to another writer's goes on as an intent, which whoever commits
    next may fold in: interrupted once it was published, "nothing was changed" was false (another
    writer's next commit made the change). It now names the intent and the commit it may land by."""
    from bucket_memory import open_store

    from .test_fleet import contend

    url = f"s3://{VERSIONED}/intent-{uuid.uuid4().hex[:8]}"
    cli("put", url, "seed.md", "--principal", "tester", given="seed\n")
    process: list[subprocess.Popen[str]] = []
    seen: list[str] = []

    def plan(number: int, method: str, path: str) -> Fault | None:
        if "interrupted" in seen:  # no more writes land, the reads that check what did pass
            return None if method in ("GET", "HEAD") else "never_answers"
        if method == "PUT" and re.search(r"/log/\d{20}\.json", path) and not seen:
            seen.append("raced")  # another writer takes the key first: this put's commit loses
            other = [COMMAND, "put", url, "theirs.md", "--principal", "other"]
            subprocess.run(other, input="theirs\n", text=True, check=True, capture_output=True, timeout=120)
        elif method == "PUT" and "/pending/" in path:
            seen.append("interrupted")
            process[0].send_signal(signal.SIGINT)
            return "lose_reply"  # the intent is published; its author never hears so
        return None

    with proxied(s3_endpoint, plan) as proxy_url:
        environment = {**os.environ, "AWS_ENDPOINT_URL": proxy_url}
        words = [COMMAND, "put", url, "mine.md", "--principal", "tester"]
        process.append(
            subprocess.Popen(
                words, stdin=subprocess.PIPE, stderr=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=environment
            )
        )
        _, stderr = process[0].communicate("mine\n", timeout=120)
    assert process[0].returncode == 130 and seen == ["raced", "interrupted"], stderr
    (said,) = [line for line in stderr.splitlines() if line.strip()]
    found = re.fullmatch(
        r"interrupted: the write may still land: its intent (pending/\S+\.json) is pending until commit (\d+), "
        r"and whoever commits to the memory before then may fold it in "
        r"\(`bucket-memory log (\S+)` shows whether it did\)",
        said,
    )
    assert found and found[2] == "34" and found[3] == url, said  # its base is commit 2: a window of 32

    async def another_writer_commits() -> None:
        async with open_store(url) as store:
            assert [info.key for info in await store.objects.list("pending/")] == [found[1]]
            contend(store)  # its next write goes through an intent too, so it folds the pending ones
            await store.write("later.md", "later", expected=None, origin=Origin(run_id="later"))
            await store.settle()

    asyncio.run(another_writer_commits())
    assert cli("cat", url, "mine.md") == "mine\n", "the interrupted write landed: nothing was changed was false"
