"""Every command, in-process, on a local directory and on moto: what it does, its exit codes, and
its --json output validated against the JSON Schema kept in docs/cli/schemas/."""

from __future__ import annotations

import asyncio
import getpass
import json
import re
import socket
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import typer
from a13n_harness.providers.memory import MemoryStoreError, Origin
from hypothesis import given
from hypothesis import strategies as st
from rich.cells import cell_len

from bucket_memory import LogFileStore, LogOptions, open_store
from bucket_memory.cli import EXIT_NO_MEMORY, EXIT_PROBLEMS, EXIT_STORE, EXIT_USAGE, app
from bucket_memory.cli.running import store_errors
from bucket_memory.cli.tables import age
from bucket_memory.format.wire_values import log_key

from .conftest import BUCKET, VERSIONED, unique_prefix
from .helpers import CliRunner, cli

SCHEMAS = Path(__file__).parent.parent / "docs" / "cli" / "schemas"


def cli_json(command: str, *arguments: str, expect: int = 0, given: str | None = None) -> Any:
    """A command's --json output (`command` may be of a group: "records ls"), checked against its schema."""
    words = command.split()
    result = CliRunner().invoke(app, [*words, *arguments, "--json"], input=given)
    assert result.exit_code == expect, f"exit {result.exit_code}: {result.output}"
    value = json.loads(result.stdout)
    jsonschema.validate(value, json.loads((SCHEMAS / f"{'-'.join(words)}.json").read_text()))
    return value


def cli_failure(*arguments: str, expect: int, given: str | None = None) -> Any:
    """What a failing command prints with --json: one object on stdout, checked against error.json."""
    result = CliRunner().invoke(app, [*arguments, "--json"], input=given)
    assert result.exit_code == expect, f"exit {result.exit_code}: {result.output}"
    value = json.loads(result.stdout)
    jsonschema.validate(value, json.loads((SCHEMAS / "error.json").read_text()))
    return value["error"]


@pytest.fixture(params=["local", "s3"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "local":
        return str(tmp_path / "memory")
    request.getfixturevalue("s3_endpoint")
    return f"s3://{VERSIONED}/{unique_prefix()}"


@pytest.fixture
def seeded(url: str) -> str:
    cli_json("put", url, "notes/tea.md", given="---\ndescription: Teas\n---\ngreen\n")
    cli_json("put", url, "todo.md", given="buy milk\n")
    cli_json("put", url, "notes/tea.md", given="---\ndescription: Teas\n---\ngreen\noolong\n")
    return url


def test_version() -> None:
    assert cli("--version").startswith("bucket-memory 0.")


def test_put_cat_ls(url: str) -> None:
    assert cli_json("put", url, "a.md", given="one\n") == {"path": "a.md", "version": "1"}
    assert cli_json("put", url, "a.md", given="two\n")["version"] == "2"  # a compare-and-swap on version 1
    assert "version_mismatch" in cli("put", url, "a.md", "--create", given="three\n", expect=EXIT_STORE)
    assert "version_mismatch" in cli("put", url, "a.md", "--expected", "1", given="three\n", expect=EXIT_STORE)
    assert cli_json("cat", url, "a.md") == {"path": "a.md", "version": "2", "text": "two\n"}
    assert cli("cat", url, "a.md", "--version", "1") == "one\n"
    cli_json("put", url, "notes/b.md", given="b\n")
    assert [entry["path"] for entry in cli_json("ls", url)] == ["a.md", "notes/b.md"]
    assert [entry["path"] for entry in cli_json("ls", url, "notes")] == ["notes/b.md"]


def test_a_conflict_names_the_version_now_and_the_newest_commit(seeded: str) -> None:
    """A refused compare-and-swap says what it found, so the next try can be decided (it used to say
    only "changed since it was read"); a create over a file says that it exists."""
    exists = cli_failure("put", seeded, "todo.md", "--create", given="tea\n", expect=EXIT_STORE)
    assert exists["code"] == "version_mismatch"
    assert exists["message"] == "todo.md already exists, at version 2 (the memory's newest commit is 3)."
    assert "--expected 2" in exists["hint"] and "log URL todo.md" in exists["hint"]
    stale = cli_failure("put", seeded, "notes/tea.md", "--expected", "1", given="tea\n", expect=EXIT_STORE)
    assert "notes/tea.md is at version 3, not 1: it changed since it was read" in stale["message"]
    assert "newest commit is 3" in stale["message"] and "--expected 3" in stale["hint"]
    gone = cli_failure("rm", seeded, "never.md", "--expected", "2", expect=EXIT_STORE)
    assert gone["message"].startswith("never.md does not exist now; it was expected at version 2")
    said = cli("mv", seeded, "todo.md", "done.md", "--expected", "1", expect=EXIT_STORE)
    assert "todo.md is at version 2, not 1" in said and "\nhint: Pass --expected 2" in said
    assert cli_json("cat", seeded, "todo.md")["text"] == "buy milk\n"


def test_a_version_outside_the_history_says_where_the_history_is(url: str) -> None:
    """`cat --version 99` at commit 5 advised `recover`; it says that the newest commit is 5. Below
    the retained log (its oldest commits compacted), it names the commits held, `log` and `recover`."""

    async def five_commits_the_first_two_compacted() -> None:
        async with open_store(url, options=LogOptions(checkpoint_max_commits=3)) as store:
            version = None
            for text in "abcde":
                version = await store.write("a.md", text, expected=version, origin=Origin(principal_id="test"))
        async with open_store(url) as store:
            assert [seq for seq, _ in await store.reader.list_checkpoints()] == [3]
            await store.objects.delete([log_key(1), log_key(2)])  # as a compaction to commit 3 does

    asyncio.run(five_commits_the_first_two_compacted())
    ahead = cli_failure("cat", url, "a.md", "--version", "99", expect=EXIT_STORE)
    assert ahead["code"] == "not_found" and "There is no commit 99 yet: the newest commit of" in ahead["message"]
    assert ahead["message"].endswith(" is 5. `bucket-memory log` lists its commits.")
    older = cli_failure("cat", url, "a.md", "--version", "2", expect=EXIT_STORE)
    assert "Commit 2 is older than the retained history of" in older["message"]
    assert "which holds commits 3 to 5" in older["message"] and "recover --as-of TIME" in older["message"]
    assert cli_json("cat", url, "a.md", "--version", "3")["text"] == "c"


def test_rm_and_mv(seeded: str) -> None:
    assert cli_json("mv", seeded, "todo.md", "done/todo.md") == {"path": "done/todo.md", "version": "4"}
    assert cli_json("rm", seeded, "done/todo.md") == {"path": "done/todo.md", "version": None}
    assert "not_found" in cli("rm", seeded, "done/todo.md", expect=EXIT_STORE)
    assert [entry["path"] for entry in cli_json("ls", seeded)] == ["notes/tea.md"]


def test_grep(seeded: str) -> None:
    matches = cli_json("grep", seeded, "OOLONG", "-i")
    assert [(match["path"], match["line"], match["text"]) for match in matches] == [("notes/tea.md", 5, "oolong")]
    assert cli_json("grep", seeded, r"^b\w+", "--regex")[0]["path"] == "todo.md"
    assert cli_json("grep", seeded, "nowhere", expect=EXIT_PROBLEMS) == []


def test_grep_and_ls_take_a_folder_the_same_ways(seeded: str) -> None:
    """`grep --path notes` was refused (the store's directories end in /) while `ls URL notes` worked."""
    for folder in ("notes", "notes/", "/notes/"):
        assert [match["path"] for match in cli_json("grep", seeded, "i", "--path", folder)] == ["notes/tea.md"]
        assert [entry["path"] for entry in cli_json("ls", seeded, folder)] == ["notes/tea.md"]
    assert cli_json("grep", seeded, "milk", "--path", "notes", expect=EXIT_PROBLEMS) == []
    assert [match["path"] for match in cli_json("grep", seeded, "i", "--path", "/")] == ["notes/tea.md", "todo.md"]
    assert cli_json("ls", seeded, "note") == [], "a folder, not a start of a name"


def test_log_walks_back_and_filters_by_time(seeded: str) -> None:
    history = cli_json("log", seeded)
    assert [(entry["version"], entry["path"]) for entry in history] == [
        ("3", "notes/tea.md"),
        ("2", "todo.md"),
        ("1", "notes/tea.md"),
    ]
    assert [entry["version"] for entry in cli_json("log", seeded, "notes/tea.md", "--limit", "1")] == ["3"]
    assert len(cli_json("log", seeded, "--since", "1h")) == 3
    assert cli_json("log", seeded, "--until", "2000-01-01T00:00:00Z") == []
    assert "is not a time" in cli("log", seeded, "--since", "yesterday", expect=EXIT_USAGE)


def test_diff_restore_rollback(seeded: str) -> None:
    assert "+oolong" in cli_json("diff", seeded, "notes/tea.md", "--from", "1")["diff"]
    assert cli_json("restore", seeded, "notes/tea.md", "--version", "1") == {"path": "notes/tea.md", "version": "4"}
    rolled = cli_json("rollback", seeded, "--to", "3", "--yes")
    assert rolled["commit"] == 5 and rolled["written"] == ["notes/tea.md"] and rolled["deleted"] == []
    assert cli_json("rollback", seeded, "--to", "3", "--yes")["commit"] is None  # already as at 3
    assert "exactly one of" in cli("rollback", seeded, expect=EXIT_USAGE)


def test_a_restore_that_deletes_shows_it_and_asks(seeded: str) -> None:
    """todo.md did not exist at version 1: restoring it to 1 deletes it (it used to, at exit 0 and
    without a word)."""
    refused = cli("restore", seeded, "todo.md", "--version", "1", expect=EXIT_USAGE)
    assert "delete todo.md" in refused and "pass --yes" in refused
    assert cli_json("cat", seeded, "todo.md")["text"] == "buy milk\n"
    assert cli_json("restore", seeded, "todo.md", "--version", "1", "--yes") == {"path": "todo.md", "version": None}
    assert "not_found" in cli("cat", seeded, "todo.md", expect=EXIT_STORE)


def test_put_refuses_an_empty_standard_input_unless_told(seeded: str) -> None:
    refused = cli("put", seeded, "todo.md", given="", expect=EXIT_USAGE)
    assert "standard input was empty" in refused and "--allow-empty" in refused
    assert cli_json("cat", seeded, "todo.md")["text"] == "buy milk\n"
    assert cli_json("put", seeded, "todo.md", "--allow-empty", given="")["version"] == "4"
    assert cli_json("cat", seeded, "todo.md")["text"] == ""


def test_put_with_no_source_on_a_terminal_reads_nothing(seeded: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("bucket_memory.cli.files._on_terminal", lambda: True)
    refused = cli("put", seeded, "todo.md", expect=EXIT_USAGE)
    assert "give a SOURCE file, or pipe the text in" in refused
    assert cli_json("cat", seeded, "todo.md")["text"] == "buy milk\n"


def test_export_import_stats_verify_compact(seeded: str, tmp_path: Path) -> None:
    exported = cli_json("export", seeded, str(tmp_path / "copy"))
    assert (exported["commit"], exported["files"]) == (3, 2)
    (tmp_path / "copy" / "todo.md").write_text("buy tea\n")
    imported = cli_json("import", seeded, str(tmp_path / "copy"))
    assert (imported["commit"], imported["written"]) == (4, ["todo.md"])
    stats = cli_json("stats", seeded)
    assert (stats["files"], stats["head"]) == (2, 4)
    assert f"bytes          {stats['bytes']} bytes of 32 MiB (0.0%)" in cli("stats", seeded)
    assert cli_json("verify", seeded) == {"ok": True, "problems": []}
    assert cli_json("compact", seeded)["floor"] == 0  # nothing older than the grace period yet


def test_recover_and_doctor(url: str) -> None:
    cli_json("put", url, "a.md", given="a\n")
    if url.startswith("s3://"):
        recovered = cli_json("recover", url)
        assert (recovered["head"], recovered["restored"], recovered["versioning"]) == (1, [], "enabled")
        assert cli_json("doctor", url) == {"create_only": True, "versioning": "enabled"}
    else:
        assert "keeps no object versions" in cli("recover", url, expect=EXIT_STORE)
        assert cli_json("doctor", url) == {"create_only": True, "versioning": None}
        assert not (Path(url) / "doctor").exists(), "the check leaves no empty folder behind"


def test_destroy_shows_asks_and_leaves_a_memory_that_refuses_every_command(seeded: str) -> None:
    planned = cli_json("destroy", seeded, "--dry-run")
    assert (planned["dry_run"], planned["objects"], planned["versions_deleted"]) == (True, 3, 0)
    assert "Not on a terminal" in cli("destroy", seeded, expect=EXIT_USAGE)
    assert "green" in cli("cat", seeded, "notes/tea.md")  # neither changed anything
    done = cli_json("destroy", seeded, "--yes")
    assert done["tombstones"] == 4  # its 3 commit keys and the seal
    if "://" not in seeded:  # in place: no old version to delete, and no text left in any file
        assert done["versions_deleted"] == 0
        assert not any(b"green" in file.read_bytes() for file in Path(seeded).rglob("*") if file.is_file())
    else:
        assert done["versions_deleted"] == 3  # what the tombstones replaced
    assert cli_failure("cat", seeded, "notes/tea.md", expect=EXIT_STORE)["code"] == "memory_deleted"
    assert cli_failure("destroy", f"{seeded}-not-there", "--yes", expect=EXIT_STORE)["code"] == "not_found"


def test_memories_lists_every_memory_under_a_bucket_or_folder(url: str, tmp_path: Path) -> None:
    root = url.rsplit("/", 1)[0]
    others = [f"{root}/{name}" for name in ("one", "two/nested")]
    for memory in others:
        cli_json("put", memory, "a.md", given="a\n")
    found = [memory["url"] for memory in cli_json("memories", root)]
    assert set(others) <= set(found) and all(memory.startswith(root) for memory in found)


def test_a_url_with_no_memory_is_exit_4_and_init_and_import_may_start_one(url: str, tmp_path: Path) -> None:
    assert "no memory at" in cli("ls", url, expect=EXIT_NO_MEMORY)
    (tmp_path / "seed").mkdir()
    (tmp_path / "seed" / "a.md").write_text("a\n")
    assert cli_json("import", url, str(tmp_path / "seed"))["commit"] == 1


def test_init_json(s3_endpoint: str) -> None:
    bucket = f"cli-{unique_prefix().rsplit('/', 1)[1]}"
    planned = cli_json("init", f"s3://{bucket}", "--dry-run")
    assert not planned["applied"] and any(step["change"] for step in planned["steps"])
    assert cli_json("init", f"s3://{bucket}")["applied"]


def test_cloud_options_and_principal(s3_endpoint: str, monkeypatch: pytest.MonkeyPatch) -> None:
    url = f"s3://{BUCKET}/{unique_prefix()}"
    cli_json("put", url, "a.md", given="a\n")
    cli("put", url, "a.md", "--principal", "alice", given="b\n")
    by = [entry["principal"] for entry in cli_json("log", url)]
    assert by[0] == "alice" and by[1].startswith("arn:aws:"), "the cloud identity, from STS"
    monkeypatch.delenv("AWS_ENDPOINT_URL")
    assert cli_json("cat", url, "a.md", "--endpoint-url", s3_endpoint, "--region", "us-east-1")["text"] == "b\n"
    assert "'no-such-profile-here'" in cli("ls", url, "--profile", "no-such-profile-here", expect=EXIT_USAGE)


def test_the_caller_is_named_off_the_event_loop_and_only_by_commands_that_commit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Naming the caller can ask STS, a blocking call of seconds: on the loop it would stall the
    store's own work, and a command that commits nothing (or fails first) should not wait on it."""
    import bucket_memory.cli.base

    asked: list[tuple[str, bool]] = []

    def identity(url: str) -> str:
        try:
            asyncio.get_running_loop()
            asked.append((url, True))
        except RuntimeError:
            asked.append((url, False))
        return "arn:aws:iam::123456789012:user/tester"

    monkeypatch.setattr(bucket_memory.cli.base, "cloud_identity", identity)
    url = str(tmp_path / "memory")
    cli_json("put", url, "a.md", given="a\n")
    cli_json("mv", url, "a.md", "b.md")
    cli_json("rm", url, "b.md")
    cli_json("records add", url, "green tea")
    assert asked == [(url, False)] * 4
    cli_json("records ls", url)
    cli_json("records search", url, "tea")
    cli_json("ls", url)
    assert cli_failure("rm", url, "b.md", expect=EXIT_STORE)["code"] == "not_found"
    assert cli_failure("mv", url, "b.md", "c.md", expect=EXIT_STORE)["code"] == "not_found"
    # A committing command asks as it reads, off the loop, so it may ask before it fails; readers never do.
    assert asked[4:] in ([], [(url, False)], [(url, False)] * 2)
    assert {entry["principal"] for entry in cli_json("log", url)} == {"arn:aws:iam::123456789012:user/tester"}


def test_with_json_every_failure_is_one_object_on_stdout(url: str) -> None:
    """Each kind of failure, each with its exit code: a script reads stdout and finds why (it used to
    find nothing there, and text on stderr)."""
    missing = cli_failure("ls", url, expect=EXIT_NO_MEMORY)
    assert missing["code"] == "no_memory" and url in missing["message"] and "memories" in missing["hint"]
    cli_json("put", url, "a.md", given="a\n")
    cli_json("put", url, "a.md", given="b\n")
    assert cli_failure("cat", url, "nope.md", expect=EXIT_STORE)["code"] == "not_found"
    usages = [
        cli_failure("cat", url, expect=EXIT_USAGE),  # click: a missing argument
        cli_failure("lss", url, expect=EXIT_USAGE),  # click: no such command
        cli_failure("log", url, "--since", "yesterday", expect=EXIT_USAGE),  # BadParameter in the command
        cli_failure("rollback", url, expect=EXIT_USAGE),  # the command's own check
    ]
    assert [usage["code"] for usage in usages] == ["usage"] * 4
    assert "Missing argument 'PATH'" in usages[0]["message"] and "cat --help" in usages[0]["hint"]
    refused = cli_failure("rollback", url, "--to", "1", expect=EXIT_USAGE, given="")  # not on a terminal
    assert refused["code"] == "needs_yes" and "--yes" in refused["message"]


def test_a_wrong_command_line_is_exit_2_before_anything_is_opened(seeded: str) -> None:
    """A URL, a path, a folder, a version, a pattern or a principal that the command line got wrong
    exited 3, as if the store had failed."""
    wrong: dict[str, list[tuple[str, ...]]] = {
        "'URL'": [("ls", "http://example.com/x"), ("ls", "s3://"), ("memories", "ftp://x"), ("init", "a/folder")],
        "'[PREFIX]'": [("ls", seeded, "a//b")],
        "'PATH'": [("cat", seeded, "../etc/passwd")],
        "'[PATH]'": [("log", seeded, "/todo.md")],
        "'--version'": [
            ("cat", seeded, "todo.md", "--version", "abc"),
            ("restore", seeded, "todo.md", "--version", "1.0"),
        ],
        "'--to'": [("diff", seeded, "todo.md", "--from", "1", "--to", "yesterday")],
        "'--expected'": [("put", seeded, "todo.md", "--expected", "v2"), ("rm", seeded, "todo.md", "--expected", "-1")],
        "'--principal'": [("put", seeded, "todo.md", "--principal", "x" * 1025)],
        "'PATTERN'": [("grep", seeded, "(", "--regex")],
        "'--path'": [("grep", seeded, "milk", "--path", "../notes")],
    }
    for name, command_lines in wrong.items():
        for arguments in command_lines:
            failure = cli_failure(*arguments, expect=EXIT_USAGE, given="tea\n")
            assert failure["code"] == "usage" and f"Invalid value for {name}" in failure["message"], failure
    assert cli_json("cat", seeded, "todo.md") == {"path": "todo.md", "version": "2", "text": "buy milk\n"}


def test_a_usage_error_inside_a_command_s_work_stays_one() -> None:
    """store_errors turned every exception it did not know, click's usage errors included, into exit 3."""
    with pytest.raises(typer.BadParameter), store_errors():
        raise typer.BadParameter("a value the command line gave")


def test_every_failure_names_its_code(url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """ "No memory at" printed as `error : ...`, with no code, and so would a store error made with an
    empty code: each failure now says `error (code): ...`, a code nobody defined as `unexpected`."""

    def error_line(*arguments: str, expect: int) -> str:
        result = CliRunner().invoke(app, list(arguments))
        assert result.exit_code == expect, result.output
        (line,) = [line for line in result.stderr.splitlines() if line.startswith("error")]
        assert re.match(r"error \([a-z_]+\): \S", line), line
        return line

    assert error_line("ls", url, expect=EXIT_NO_MEMORY).startswith("error (no_memory): no memory at")
    cli_json("put", url, "a.md", given="a\n")
    assert error_line("cat", url, "nope.md", expect=EXIT_STORE).startswith("error (not_found): nope.md")

    async def broken(*_: object, **__: object) -> None:
        raise MemoryStoreError("", "the store broke")  # type: ignore[arg-type]

    monkeypatch.setattr(LogFileStore, "read", broken)
    assert error_line("cat", url, "a.md", expect=EXIT_STORE) == "error (unexpected): the store broke (code '')"
    assert cli_failure("cat", url, "a.md", expect=EXIT_STORE)["code"] == "unexpected"


def test_a_mistyped_command_is_suggested_once(url: str) -> None:
    """Typer and click each added "Did you mean 'ls'?"."""
    for words, suggestion in ((["lss", url], "Did you mean 'ls'?"), (["records", "serch", url], "'search'")):
        said = CliRunner().invoke(app, words, env={"COLUMNS": "400"})
        assert said.exit_code == EXIT_USAGE and said.stderr.count("Did you mean") == 1, said.stderr
        assert suggestion in said.stderr
        assert cli_failure(*words, expect=EXIT_USAGE)["message"].count("Did you mean") == 1


def test_without_json_a_failure_is_text_on_stderr(url: str) -> None:
    result = CliRunner().invoke(app, ["ls", url])
    assert (result.exit_code, result.stdout) == (EXIT_NO_MEMORY, "")
    assert (
        result.stderr.startswith(f"error (no_memory): no memory at {url}") and "\nhint: Check the URL" in result.stderr
    )
    result = CliRunner().invoke(app, ["put", url, "a.md", "--", "--json"], input="a\n")
    assert result.exit_code == EXIT_USAGE and result.stdout == "", "--json after -- is a SOURCE, not the flag"
    assert "cannot read --json" in result.stderr


def test_with_no_region_changes_are_attributed_to_the_cloud_identity(
    url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With no region configured, every change was attributed to the OS user (botocore wants a
    region for STS); STS answers from us-east-1 for any caller. A local memory has no cloud identity."""
    monkeypatch.delenv("AWS_DEFAULT_REGION", raising=False)
    monkeypatch.delenv("AWS_REGION", raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))  # nor a region from ~/.aws/config
    cli_json("put", url, "a.md", given="a\n")
    by = cli_json("log", url)[0]["principal"]
    assert by.startswith("arn:aws:") if url.startswith("s3://") else by == getpass.getuser()


def test_when_sts_cannot_answer_changes_are_attributed_to_the_os_user(
    s3_endpoint: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with socket.socket() as closed:  # a port nothing listens on: STS refuses at once
        closed.bind(("127.0.0.1", 0))
        monkeypatch.setenv("AWS_ENDPOINT_URL_STS", f"http://127.0.0.1:{closed.getsockname()[1]}")
    url = f"s3://{BUCKET}/{unique_prefix()}"
    cli_json("put", url, "a.md", given="a\n")
    assert cli_json("log", url)[0]["principal"] == getpass.getuser()


AGENT = Origin(
    run_id="run-3ccb49c5-3099-44ff-9a48-069e850288f5",
    principal_id="arn:aws:sts::123456789012:assumed-role/agent-role/i-0123456789abcdef0",
    tool_call_id="call_1ec65da565ab4014ba1877730b1facaa",
)


def table_at(columns: int, *arguments: str) -> list[str]:
    """A command's table on a terminal `columns` wide, its lines checked to fit."""
    result = CliRunner().invoke(app, list(arguments), env={"COLUMNS": str(columns)})
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert all(cell_len(line.rstrip()) <= columns for line in lines), result.stdout
    return lines


def cells(lines: list[str], header: str, after: str | None) -> list[str]:
    """Each row's cell under `header` (up to the column `after`), the lines it wraps onto joined
    with no spaces (where the wrap fell is the table's choice): a row starts where the first
    column has a value."""
    start = lines[0].index(f" {header}")
    end = lines[0].index(f" {after}") if after else None
    found: list[str] = []
    for line in lines[1:]:
        piece = line[start:end].strip()
        if line[:2].strip():
            found.append(piece)
        else:
            found[-1] += piece
    return found


def test_log_and_records_fit_80_columns_and_wide_shows_everything(url: str) -> None:
    """At 80 columns, `log` cut its times, ran principal and run together and cut ids; now versions
    and ids are whole, paths fold onto more lines, times are ages, and --wide shows every value
    (`ls` too)."""
    long = "notes/projects/2026/release-planning-for-the-q3-launch.md"

    async def history() -> None:
        async with open_store(url) as store:
            version = await store.write(long, "plan\n", expected=None, origin=AGENT)
            await store.write("todo.md", "milk\n", expected=None, origin=Origin(principal_id="alice"))
            await store.move(long, "notes/archive/release-planning.md", expected=version, origin=AGENT)

    asyncio.run(history())
    revisions = cli_json("log", url)
    lines = table_at(80, "log", url)
    assert lines[0].split() == ["version", "time", "action", "path", "by", "run"]
    assert cells(lines, "version", "time") == [revision["version"] for revision in revisions] == ["3", "3", "2", "1"]
    assert [cell.replace(" ", "") for cell in cells(lines, "path", "by")] == [
        f"{long}->notes/archive/release-planning.md",
        f"notes/archive/release-planning.md<-{long}",
        "todo.md",
        long,
    ], "folded, nothing lost"
    assert all(age.endswith(" ago") for age in cells(lines, "time", "action"))
    by = cells(lines, "by", "run")
    assert by[2] == "alice" and all(by[row].startswith("agent-role") for row in (0, 1, 3)), "an ARN by its name"
    wide = "\n".join(table_at(1000, "log", url, "--wide"))
    assert cells(wide.splitlines(), "time", "action") == [revision["time"] for revision in revisions]
    ended = "\n".join(f"{line} " for line in wide.splitlines())  # a line's last value ends it: no padding
    assert all(f" {value} " in ended for value in (AGENT.principal_id, AGENT.run_id, AGENT.tool_call_id, long))

    listed = table_at(80, "ls", url)
    assert cells(listed, "path", "version") == ["notes/archive/release-planning.md", "todo.md"]
    assert cells(listed, "version", "bytes") == ["3", "2"]

    statement = "The team drinks green tea at standup, every morning at nine, except on Fridays (coffee)."
    added = [cli_json("records add", url, text) for text in (statement, "Deploys happen on Tuesdays.")]
    lines = table_at(80, "records", "ls", url)
    assert sorted(cells(lines, "id", "updated")) == sorted(record["id"] for record in added), "ids whole"
    texts = cells(lines, "text", None)
    assert "Deploys happen on Tuesdays." in texts, "whole where it fits"
    assert any(text.endswith("…") and statement.startswith(text[:-1]) for text in texts), "cut on one line"
    wide = "\n".join(table_at(1000, "records", "ls", url, "--wide"))
    assert statement in wide and all(record["updated_at"] in wide for record in added)


def test_a_table_written_to_a_file_is_whole_and_unpadded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Off a terminal and with no COLUMNS, a table is not cut at rich's 80 columns nor padded."""
    monkeypatch.delenv("COLUMNS", raising=False)
    url = str(tmp_path / "facts")
    statement = "The team drinks green tea at standup, every morning at nine, except on Fridays (coffee). " * 2
    cli_json("records add", url, statement.strip())
    for words in (("records", "ls", url), ("records", "search", url, "tea"), ("ls", url)):
        result = CliRunner().invoke(app, list(words))
        assert result.exit_code == 0, result.output
        lines = result.stdout.splitlines()
        assert all(line == line.rstrip() for line in lines), "no padding"
        assert "…" not in result.stdout and (words[0] == "ls" or statement.strip() in result.stdout)


def test_ages_are_short_and_exact_past_a_month() -> None:
    now = datetime(2026, 11, 30, 17, 6, 47, tzinfo=UTC)
    ages = {
        "2026-11-30T17:06:47Z": "0s ago",
        "2026-11-30T17:06:02Z": "45s ago",
        "2026-11-30T16:54:47.5Z": "11m ago",
        "2026-11-30T14:00:00+00:00": "3h ago",
        "2026-11-25T17:06:47Z": "5d ago",
        "2026-10-31T17:06:48Z": "29d ago",
        "2026-10-01T00:00:00Z": "2026-10-01",
        "2026-11-30T17:08:50Z": "in 2m",  # a writer whose clock runs ahead
    }
    assert {moment: age(moment, now) for moment in ages} == ages


@given(st.text(max_size=40) | st.from_regex(r"\d{1,30}\s*[smhdw]", fullmatch=True))
def test_any_time_text_is_a_time_or_a_usage_error(text: str) -> None:
    import typer

    from bucket_memory.cli.base import moment

    try:
        parsed = moment(text)
    except typer.BadParameter as error:
        message = str(error)
        assert "is not a time" in message
        return
    assert parsed.tzinfo is not None


def test_put_of_an_unreadable_source_is_a_usage_error(url: str, tmp_path: Path) -> None:
    (tmp_path / "binary").write_bytes(b"\xff\xfe")
    assert "not UTF-8" in cli("put", url, "a.md", str(tmp_path / "binary"), expect=EXIT_USAGE)
    assert "cannot read" in cli("put", url, "a.md", str(tmp_path / "missing"), expect=EXIT_USAGE)


def test_records_add_ls_search_rm(url: str) -> None:
    tea = cli_json("records add", url, "The team drinks green tea at standup.")
    cli_json("records add", url, "Deploys happen on Tuesdays.")
    assert len(tea["id"]) == 32 and tea["text"] == "The team drinks green tea at standup."
    assert sorted(record["text"] for record in cli_json("records ls", url)) == [
        "Deploys happen on Tuesdays.",
        "The team drinks green tea at standup.",
    ]
    assert len(cli_json("records ls", url, "--limit", "1")) == 1
    found = cli_json("records search", url, "which tea at standup")
    assert [record["id"] for record in found] == [tea["id"]] and found[0]["score"] > 0
    assert cli_json("records rm", url, tea["id"]) == {"id": tea["id"]}
    assert "record_not_found" in cli("records", "rm", url, tea["id"], expect=EXIT_STORE)
    assert "invalid_text" in cli("records", "add", url, "   ", expect=EXIT_STORE)
    # Records are files of the memory: their history is the memory's.
    assert [entry["action"] for entry in cli_json("log", url, "--limit", "10")][:1] == ["delete"]
    assert "Deploys" in cli("records", "ls", url)


def test_the_callers_identity_is_asked_of_sts_once_per_access_key(s3_endpoint: str) -> None:
    """The ARN STS gave is kept per access key and endpoint in the user's cache: a second command
    asks no one (it cost a fifth of a second of each command); another key asks again; a cache
    that is not JSON, or not ours, is read as empty."""
    from bucket_memory.cli import identity

    url = f"s3://{BUCKET}/{unique_prefix()}"
    first = identity.cloud_identity(url)
    assert first is not None and first.startswith("arn:aws:")
    cache = identity._cache()
    assert len(json.loads(cache.read_text())) == 1 and oct(cache.stat().st_mode)[-3:] == "600"
    (key,) = json.loads(cache.read_text())
    cache.write_text(json.dumps({key: {"arn": "arn:aws:iam::1:user/cached", "until": time.time() + 60}}))
    assert identity.cloud_identity(url) == "arn:aws:iam::1:user/cached", "the second asks no one"
    for hostile in ("[1, 2]", "{", '{"k": ' * 5000 + "1" + "}" * 5000, "\x00", json.dumps({key: "arn:aws:x"})):
        cache.write_text(hostile)
        assert identity.cloud_identity(url) == first


def test_a_cached_principal_expires_so_a_renamed_user_is_named_anew(
    s3_endpoint: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 56: the principal cached per access key was kept until 64 newer keys pushed it out, so
    a renamed IAM user's commits (its keys keep working) were attributed to the old name for good.
    An answer is trusted an hour at most, and not past the credentials' own expiry."""
    import botocore.session

    from bucket_memory.cli import identity

    iam = botocore.session.get_session().create_client("iam")
    name = f"user-{uuid.uuid4().hex[:8]}"
    iam.create_user(UserName=name)
    key = iam.create_access_key(UserName=name)["AccessKey"]
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", key["AccessKeyId"])
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", key["SecretAccessKey"])
    url = f"s3://{BUCKET}/{unique_prefix()}"
    before = time.time()
    assert identity.cloud_identity(url) == f"arn:aws:iam::123456789012:user/{name}"
    iam.update_user(UserName=name, NewUserName=f"{name}-renamed")
    assert identity.cloud_identity(url) == f"arn:aws:iam::123456789012:user/{name}", "within the hour: the cache"
    cache = identity._cache()
    entries = json.loads(cache.read_text())
    ((cached, entry),) = entries.items()
    assert before + 3600 >= entry["until"] - 1 and entry["until"] <= time.time() + 3600, "an hour at most"
    cache.write_text(json.dumps({cached: {**entry, "until": time.time() - 1}}))  # as an hour later
    assert identity.cloud_identity(url) == f"arn:aws:iam::123456789012:user/{name}-renamed"

    class Temporary:
        _expiry_time = datetime.now(UTC) + timedelta(seconds=60)

    assert identity._until(Temporary()) <= time.time() + 61, "not past the credentials' expiry"


def test_a_cached_principal_the_store_refuses_names_the_cache(s3_endpoint: str) -> None:
    from bucket_memory.cli import identity

    url = f"s3://{BUCKET}/{unique_prefix()}"
    assert identity.cloud_identity(url) is not None
    cache = identity._cache()
    (key,) = json.loads(cache.read_text())
    cache.write_text(json.dumps({key: {"arn": "arn:aws:iam::1:user/x\x1b[2K", "until": time.time() + 60}}))
    printed = cli("put", url, "a.md", given="a\n", expect=EXIT_STORE)
    flat = "".join(printed.split())
    assert "invalid_text" in printed and str(cache).replace(" ", "") in flat and "Delete" in printed, printed
    # The bucket is unversioned, so whichever test writes to it first in a day is also warned.
    assert "a.md: now version 1" in cli("put", url, "a.md", "--principal", "alice", given="a\n").splitlines()
