"""Issue 56: nothing a writer stores reaches the operator's terminal raw. A record, a file's text and
description, a model's name hold ESC sequences (cursor up and erase line, OSC 52 set-clipboard,
conceal), a C1 CSI and a bidi override; every command that prints them shows them escaped, in its
tables, its lines and its JSON; `cat` alone writes the text as it is, and warns on a terminal."""

from __future__ import annotations

import asyncio
import os
import pty
import subprocess
import sys
from pathlib import Path

from a13n_harness.providers.memory import Origin

from bucket_memory import LogFileStore, MemoryAdmin
from bucket_memory.format.wire_values import time_text
from bucket_memory.objects.local import LocalObjectStore
from bucket_memory.records.record_format import Embedding, RecordBody

from .helpers import cli

COMMAND = str(Path(sys.executable).with_name("bucket-memory"))
UP_ERASE, CLIPBOARD, CONCEAL = "\x1b[1A\x1b[2K", "\x1b]52;c;aGk=\x07", "\x1b[8m"
HOSTILE = f"tea{UP_ERASE} ok{CLIPBOARD}{CONCEAL}hidden\x9b31m\u202egnp.exe"
# What a terminal acts on: C0 but tab and newline, DEL, C1, and the bidi controls.
ACTED_ON = {chr(code) for code in (*range(0x20), 0x7F, *range(0x80, 0xA0), 0x202E)} - {"\t", "\n"}


def _raw(printed: str) -> set[str]:
    return {char for char in printed if char in ACTED_ON}


def _seed_files(url: str) -> str:
    text = f'---\ndescription: "{HOSTILE.encode("unicode_escape").decode()}"\n---\nline {HOSTILE}\n'
    cli("put", url, "notes/a.md", given="before\n")
    cli("put", url, "notes/a.md", given=text)
    return text


def test_file_commands_show_stored_controls_escaped(tmp_path: Path) -> None:
    url = str(tmp_path / "memory")
    _seed_files(url)
    for words in (
        ("ls", url),
        ("ls", url, "--wide"),
        ("ls", url, "--json"),
        ("grep", url, "tea"),
        ("grep", url, "tea", "--json"),
        ("diff", url, "notes/a.md", "--from", "1"),
        ("log", url),
    ):
        printed = cli(*words)
        assert not _raw(printed), (words, printed)
    assert "\\x1b]52;c;aGk=\\x07" in cli("grep", url, "tea") and "\\u202e" in cli("ls", url, "--wide")


def test_record_commands_show_stored_controls_escaped(tmp_path: Path) -> None:
    url = str(tmp_path / "facts")
    cli("records", "add", url, HOSTILE)
    for words in (
        ("records", "ls", url),
        ("records", "search", url, "tea"),
        ("records", "search", url, "tea", "--json"),
    ):
        printed = cli(*words)
        assert not _raw(printed), (words, printed)
        assert "tea\\x1b[1A" in printed.replace("\\u001b", "\\x1b")
    model = f"openai:small{UP_ERASE}{CLIPBOARD}\u202e"
    body = RecordBody("water", time_text(1.7e9), (Embedding(model, ""),)).encode()
    admin = MemoryAdmin(LogFileStore(LocalObjectStore(url)))
    asyncio.run(admin.put_files({f"{'b' * 32}.json": body}, replace=False, origin=Origin(run_id="seed")))
    for words in (("records", "doctor", url), ("records", "doctor", url, "--json")):
        printed = cli(*words, expect=1)
        assert not _raw(printed) and "openai:small\\x1b[1A" in printed.replace("\\u001b", "\\x1b"), printed


def test_cat_writes_the_text_as_stored_and_warns_only_on_a_terminal(tmp_path: Path) -> None:
    url = str(tmp_path / "memory")
    text = _seed_files(url)
    piped = subprocess.run([COMMAND, "cat", url, "notes/a.md"], capture_output=True, timeout=120)
    assert piped.returncode == 0 and piped.stdout == text.encode() and piped.stderr == b""
    controller, terminal = pty.openpty()
    try:
        on_terminal = subprocess.run(
            [COMMAND, "cat", url, "notes/a.md"], stdout=terminal, stderr=subprocess.PIPE, timeout=120
        )
        os.close(terminal)
        shown = b""
        while chunk := _read(controller):
            shown += chunk
    finally:
        os.close(controller)
    assert on_terminal.returncode == 0 and CLIPBOARD.encode() in shown  # as stored
    assert b"control characters" in on_terminal.stderr


def _read(descriptor: int) -> bytes:
    try:
        return os.read(descriptor, 65536)
    except OSError:  # the terminal's other end closed: all was read
        return b""
