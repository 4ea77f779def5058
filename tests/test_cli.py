"""The `bucket-memory` command against moto and a local directory, in-process, and once as the installed command."""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from a13n_harness.providers.memory import DirectoryFileStore, Origin

from bucket_memory import open_store
from bucket_memory.format.wire_values import log_key

from .helpers import cli

COMMAND = str(Path(sys.executable).with_name("bucket-memory"))
ORIGIN = Origin(run_id="cli-test", principal_id="tester")


run = cli


def test_the_installed_command_runs(tmp_path: Path) -> None:
    """A smoke test of the entry point as a user starts it; everything else runs in-process."""
    done = subprocess.run([COMMAND, "--version"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.startswith("bucket-memory 0.")
    done = subprocess.run([COMMAND, "ls", str(tmp_path / "none")], capture_output=True, text=True, timeout=120)
    assert done.returncode == 4 and "no memory at" in done.stderr


# A native thread (obstore's tokio) stalled inside `call_soon_threadsafe` once it woke the loop, with
# the GIL let go (as `socket.send` lets it go), back for it only when the interpreter finalizes;
# and a finalization slowed down so that it is still under way then. Before issue 45's fix the
# process aborted every time; the chance alone hit about one run in two hundred on a loaded machine.
_NATIVE_THREAD_AT_EXIT = """
import asyncio.selector_events as selector_events
import atexit, sys, threading, time

stalled = []
write = selector_events.BaseSelectorEventLoop._write_to_self

def stalling_write(self, sleep=time.sleep, finalizing=sys.is_finalizing):
    write(self)
    if isinstance(threading.current_thread(), threading._DummyThread):  # a thread Python did not start
        stalled.append(threading.get_ident())
        while not finalizing():
            sleep(0.001)

selector_events.BaseSelectorEventLoop._write_to_self = stalling_write
atexit.register(lambda: print(f"stalled {len(stalled)} native threads", file=sys.stderr))

class SlowFinalization:
    def __del__(self, sleep=time.sleep):
        sleep(0.5)

slow = SlowFinalization()  # freed with __main__'s globals, after finalization began
sys.argv = ["bucket-memory", *sys.argv[1:]]
from bucket_memory.cli import main
main()
"""


def test_a_native_thread_still_in_the_loop_cannot_abort_the_exit(s3_endpoint: str) -> None:
    """Issue 45: `cat` printed its error, then died by SIGABRT instead of exiting with its code."""
    from .conftest import BUCKET, unique_prefix

    url = f"s3://{BUCKET}/{unique_prefix()}"  # read through obstore: `cat` opens the store read-only
    command = [sys.executable, "-c", _NATIVE_THREAD_AT_EXIT, "cat", url, "notes/tea.md"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert "stalled 0 " not in done.stderr and "native threads" in done.stderr, done.stderr[-2000:]
    assert done.returncode == 4 and "no memory at" in done.stderr, (done.returncode, done.stderr[-2000:])


@pytest.fixture(params=["local", "s3"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "local":
        return str(tmp_path / "memory")
    from .conftest import BUCKET, unique_prefix

    request.getfixturevalue("s3_endpoint")
    return f"s3://{BUCKET}/{unique_prefix()}"


async def seed(url: str) -> None:
    async with open_store(url) as store:
        v1 = await store.write("notes/tea.md", "---\ndescription: Teas\n---\ngreen\n", expected=None, origin=ORIGIN)
        await store.write("todo.md", "buy milk\n", expected=None, origin=ORIGIN)
        await store.write("notes/tea.md", "---\ndescription: Teas\n---\ngreen\noolong\n", expected=v1, origin=ORIGIN)


def test_read_commands(url: str) -> None:
    asyncio.run(seed(url))
    listed = json.loads(run("ls", url, "--json"))
    assert [(e["path"], e["version"], e["description"]) for e in listed] == [
        ("notes/tea.md", "3", "Teas"),
        ("todo.md", "2", "buy milk"),
    ]
    assert run("cat", url, "notes/tea.md").endswith("green\noolong\n")
    assert run("cat", url, "notes/tea.md", "--version", "1").endswith("green\n")
    history = json.loads(run("log", url, "notes/tea.md", "--json"))
    assert [(r["version"], r["action"], r["principal"]) for r in history] == [
        ("3", "write", "tester"),
        ("1", "write", "tester"),
    ]
    assert "+oolong" in run("diff", url, "notes/tea.md", "--from", "1")
    stats = json.loads(run("stats", url, "--json"))
    assert (stats["files"], stats["head"], stats["commits"], stats["history_floor"]) == (2, 3, 3, 1)
    assert "ok" in run("verify", url)
    assert "does not exist" in run("cat", url, "nope.md", expect=3)


def test_restore_rollback_export_import(url: str, tmp_path: Path) -> None:
    asyncio.run(seed(url))
    assert "now version 4" in run("restore", url, "notes/tea.md", "--version", "1")
    assert run("cat", url, "notes/tea.md").endswith("---\ngreen\n")
    assert "Not on a terminal: pass --yes" in run("rollback", url, "--to", "3", expect=2)
    assert run("cat", url, "notes/tea.md").endswith("---\ngreen\n"), "nothing changed without --yes"
    shown = run("rollback", url, "--to", "3", "--yes")
    assert "would write 1 file and delete 0 files" in shown and "write  notes/tea.md" in shown
    assert "as commit 5" in shown
    assert run("cat", url, "notes/tea.md").endswith("green\noolong\n")
    assert "already" in run("rollback", url, "--to", "3")
    exported = tmp_path / "exported"
    run("export", url, str(exported))
    plain = DirectoryFileStore(exported)
    assert [(entry.path, entry.description) for entry in asyncio.run(plain.list())] == [
        ("notes/tea.md", "Teas"),
        ("todo.md", "buy milk"),
    ]
    (exported / "todo.md").write_text("buy tea\n")
    (exported / ".hidden").write_text("imported too\n")
    (exported / ".git").mkdir()
    (exported / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    imported = run("import", url, str(exported))
    assert (
        "committed as commit 6" in imported
        and "1 path skipped" in imported
        and "skipped .git: a version-control folder" in imported
    )
    assert run("cat", url, "todo.md") == "buy tea\n"
    assert run("cat", url, ".hidden") == "imported too\n"
    assert "not an empty directory" in run("export", url, str(exported), expect=2)


def test_verify_fails_on_a_corrupted_object(tmp_path: Path) -> None:
    url = str(tmp_path / "memory")
    asyncio.run(seed(url))
    assert "ok" in run("verify", url)
    target = tmp_path / "memory" / log_key(2)
    target.chmod(0o644)
    target.write_bytes(target.read_bytes()[:-10])
    output = run("verify", url, expect=1)
    assert log_key(2) in output
    verified = json.loads(run("verify", url, "--json", expect=1))
    assert not verified["ok"] and verified["problems"][0]["key"] == log_key(2)
    assert "corrupt" in run("ls", url, expect=3)


def test_bad_input_is_a_clear_error(tmp_path: Path) -> None:
    assert "unsupported scheme" in run("ls", "http://example.com/x", expect=2)
    assert "Give exactly one" in run("rollback", str(tmp_path), expect=2)
    assert "no memory at" in run("cat", str(tmp_path / "mistyped"), "todo.md", expect=4)
    asyncio.run(seed(str(tmp_path / "memory")))
    assert 'A path has no empty, "." or ".." segments' in run("cat", str(tmp_path / "memory"), "../x", expect=2)


@pytest.mark.parametrize("words", [["--help"], ["--version"], ["records", "--help"], ["ls", "--help"]])
def test_help_and_version_import_nothing_of_the_store(words: list[str]) -> None:
    """The harness's memory package alone takes most of a second to import (issue 28); a command
    line that only asks for help or the version must not pay for it, nor for a cloud SDK."""
    probe = (
        "import sys\nfrom bucket_memory.cli import app\n"
        f"try:\n    app({words!r})\nexcept SystemExit:\n    pass\n"
        "heavy = sorted(m for m in sys.modules if m.startswith(('a13n_harness.providers.memory', 'aiobotocore', "
        "'google.cloud', 'bucket_memory.files.store', 'numpy')))\nprint('HEAVY', heavy)\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert "HEAVY []" in done.stdout, done.stdout[-500:]


def test_every_public_name_resolves_from_the_package() -> None:
    """The package imports its names on first use; each one in `__all__` must still be there."""
    import bucket_memory

    for name in bucket_memory.__all__:
        value = getattr(bucket_memory, name)
        assert isinstance(value, int) or value.__module__.startswith("bucket_memory."), name
    with pytest.raises(AttributeError):
        bucket_memory.NoSuchName  # noqa: B018


def test_aws_cli_habits_get_a_hint_not_silence(tmp_path: Path) -> None:
    """Issue 45: a file's path run into the memory's URL, and - given as the path."""
    printed = cli("cat", "s3://acme/teams/blue/notes/release.md", expect=2)
    assert "Missing argument 'PATH'" in printed and "s3://acme/teams/blue notes/release.md" in printed
    printed = json.loads(cli("cat", "s3://acme/teams", "--json", expect=2))
    assert "notes/tea.md" in printed["error"]["message"] + printed["error"].get("hint", "")
    memory = str(tmp_path / "memory")
    printed = cli("put", memory, "-", given="green tea\n", expect=2)
    assert "standard input" in printed and not (tmp_path / "memory").exists(), "nothing was written, no file '-'"
    cli("put", memory, "notes/tea.md", "-", given="green tea\n")
    assert cli("cat", memory, "notes/tea.md") == "green tea\n"


def test_help_paragraphs_are_not_broken_mid_phrase() -> None:
    """A docstring's line breaks are not the help's: each paragraph wraps at the terminal's width."""
    assert "2 the command line was wrong" in cli("--help")
    assert "the bucket's old versions of them" in cli("erase", "--help")


def test_help_lists_the_days_commands_first() -> None:
    """`--help` listed erase first (registration order, by module name); docs/cli.md follows it."""
    printed = cli("--help")
    listed = re.findall(r"^│ (\w+) ", printed, flags=re.M)
    assert listed[:7] == ["ls", "cat", "put", "rm", "mv", "grep", "diff"], listed
    assert listed[-2:] == ["erase", "destroy"], listed
    reference = (Path(__file__).parent.parent / "docs" / "cli.md").read_text()
    assert re.findall(r"^## `(\w+)`", reference, flags=re.M)[:2] == ["ls", "cat"]
