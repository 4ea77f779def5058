"""Import and export keep everything, bulk changes show what they do first, and a URL that holds no
memory says so: the CLI in-process, on a local directory, moto and fake-gcs-server."""

from __future__ import annotations

import asyncio
import unicodedata
from pathlib import Path

import pytest
from a13n_harness.providers.memory import Origin

from bucket_memory import MemoryAdmin, open_store
from bucket_memory.cli import EXIT_NO_MEMORY
from bucket_memory.testing.proxy import fault_proxy

from .conftest import BUCKET, unique_prefix
from .helpers import cli
from .test_cli_commands import cli_json

ORIGIN = Origin(run_id="transfer-test")
FILES = {"a.md": "a\r\nwith CRLF kept\r\n", ".hidden/notes.md": "dot-files are memory too\n", "b/c.md": "c\n"}


@pytest.fixture(params=["local", "s3", "gs"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "local":
        return str(tmp_path / "memory")
    request.getfixturevalue("s3_endpoint" if request.param == "s3" else "gcs_endpoint")
    return f"{request.param}://{BUCKET}/{unique_prefix()}"


async def seeded(url: str) -> None:
    async with open_store(url) as store:
        await MemoryAdmin(store).put_files(FILES, replace=False, origin=ORIGIN)


async def files_of(url: str) -> dict[str, str]:
    async with open_store(url) as store:
        return {entry.path: (await store.read(entry.path)).text for entry in await store.list()}


def test_an_export_import_round_trip_keeps_dot_files_and_bytes(url: str, tmp_path: Path) -> None:
    asyncio.run(seeded(url))
    copy = tmp_path / "copy"
    assert "exported 3 files as at commit 1" in cli("export", url, str(copy))
    assert (copy / ".hidden" / "notes.md").read_text() == FILES[".hidden/notes.md"]
    assert (copy / "a.md").read_bytes() == FILES["a.md"].encode()
    assert "nothing changed" in cli("import", url, str(copy), "--replace", "--yes")
    assert asyncio.run(files_of(url)) == FILES


def test_names_that_are_one_path_in_nfc_are_refused_naming_both(url: str, tmp_path: Path) -> None:
    asyncio.run(seeded(url))
    source = tmp_path / "source"
    source.mkdir()
    composed, decomposed = unicodedata.normalize("NFC", "café.md"), unicodedata.normalize("NFD", "café.md")
    (source / composed).write_text("one\n")
    (source / decomposed).write_text("two\n")
    refusal = cli("import", url, str(source), expect=3)
    assert str(source / composed) in refusal and str(source / decomposed) in refusal and "NFC" in refusal
    assert asyncio.run(files_of(url)) == FILES


def test_replace_shows_what_it_deletes_and_needs_yes_off_a_terminal(url: str, tmp_path: Path) -> None:
    asyncio.run(seeded(url))
    empty = tmp_path / "empty"
    empty.mkdir()
    refused = cli("import", url, str(empty), "--replace", expect=2)
    assert "delete 3 files" in refused and "delete .hidden/notes.md" in refused and "pass --yes" in refused
    assert asyncio.run(files_of(url)) == FILES
    assert "committed as commit 2" in cli("import", url, str(empty), "--replace", "--yes")
    assert asyncio.run(files_of(url)) == {}


def test_replace_never_deletes_where_it_skipped(url: str, tmp_path: Path) -> None:
    asyncio.run(seeded(url))
    source = tmp_path / "source"
    (source / ".git").mkdir(parents=True)
    (source / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (source / "a.md").write_text("new a\n")

    async def with_git_named_file() -> None:
        async with open_store(url) as store:
            await store.write(".git/notes.md", "a memory file under .git\n", expected=None, origin=ORIGIN)

    asyncio.run(with_git_named_file())
    output = cli("import", url, str(source), "--replace", "--yes")
    assert "delete .git/notes.md" not in output and "1 path skipped" in output
    assert "skipped .git: a version-control folder" in output
    assert asyncio.run(files_of(url)) == {"a.md": "new a\n", ".git/notes.md": "a memory file under .git\n"}


def test_replace_never_deletes_a_file_whose_source_is_not_a_regular_file(url: str, tmp_path: Path) -> None:
    """A FIFO or a socket at a memory file's path is skipped and named, and --replace keeps that
    file (it planned its deletion, exit 0). The FIFO is never opened: reading it would block."""
    import os
    import socket

    asyncio.run(seeded(url))
    source = tmp_path / "source"
    (source / "b").mkdir(parents=True)
    os.mkfifo(source / "a.md")
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(source / "b" / "c.md"))
    try:
        output = cli("import", url, str(source), "--replace", "--yes")
    finally:
        listener.close()
    assert "skipped a.md: a FIFO, not a regular file" in output
    assert "skipped b/c.md: a socket, not a regular file" in output
    assert "delete a.md" not in output and "delete b/c.md" not in output
    assert asyncio.run(files_of(url)) == {"a.md": FILES["a.md"], "b/c.md": FILES["b/c.md"]}


def test_a_file_too_large_is_refused_by_its_size_and_named(url: str, tmp_path: Path) -> None:
    source = tmp_path / "source"
    source.mkdir()
    (source / "ok.md").write_text("fine\n")
    with (source / "huge.md").open("wb") as huge:  # sparse: its size says enough, nothing need be read
        huge.truncate(1 << 40)
    refused = cli("import", url, str(source), expect=3)
    assert "huge.md" in refused and "too_large" in refused and str(1 << 40) in refused
    assert "Nothing was imported" in refused


def test_import_json_names_each_skipped_path_and_why(url: str, tmp_path: Path) -> None:
    source = tmp_path / "source"
    (source / ".git").mkdir(parents=True)
    (source / "a.md").write_text("a\n")
    (source / "link.md").symlink_to(source / "a.md")
    imported = cli_json("import", url, str(source))
    assert imported["skipped"] == [
        {"path": ".git", "reason": "a version-control folder"},
        {"path": "link.md", "reason": "a link, not a regular file"},
    ]


def test_restore_of_a_path_with_no_history_is_an_error(url: str) -> None:
    asyncio.run(seeded(url))
    assert "not_found" in cli("restore", url, "never.md", "--version", "1", expect=3)
    assert asyncio.run(files_of(url)) == FILES


@pytest.mark.parametrize(
    "command",
    [["ls"], ["cat", "a.md"], ["log"], ["diff", "a.md", "--from", "1"], ["stats"], ["verify"], ["compact"]],
    ids=lambda command: command[0],
)
def test_a_url_that_holds_no_memory_says_so(url: str, command: list[str], tmp_path: Path) -> None:
    output = cli(command[0], url, *command[1:], expect=EXIT_NO_MEMORY)
    assert "no memory at" in output


def test_export_is_one_snapshot_without_a_request_per_file(s3_endpoint: str, tmp_path: Path) -> None:
    url = f"s3://{BUCKET}/{unique_prefix()}"
    many = {f"notes/{n:03d}.md": f"note {n}\n" for n in range(200)}

    async def seed_and_export() -> int:
        async with open_store(url) as store:
            await MemoryAdmin(store).put_files(many, replace=False, origin=ORIGIN)
        async with fault_proxy(s3_endpoint, lambda number, method, path: None) as (proxy_url, proxy):
            with pytest.MonkeyPatch.context() as environment:
                environment.setenv("AWS_ENDPOINT_URL", proxy_url)
                await asyncio.to_thread(cli, "export", url, str(tmp_path / "copy"))
            return proxy.requests

    requests = asyncio.run(seed_and_export())
    assert requests <= 6, f"{requests} requests for 200 files"  # the no-memory check and one cold start
    assert len(list((tmp_path / "copy" / "notes").iterdir())) == 200
