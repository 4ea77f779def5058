"""`bucket-memory erase` and `records erase`: shown first, asked, refused without the operator's grants."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from a13n_harness.providers.memory import Origin

from bucket_memory import LogRecordStore, open_store
from bucket_memory.policy import access_policy, operator_policy

from .helpers import cli, iam_enforced_moto
from .test_erase import FRAGMENTS, OFTEN, SECRET, every_stored_version_at, leaks, remembered

URL = "s3://erasable/team"


def test_dry_run_lists_what_it_would_change_and_changes_nothing(tmp_path: Path) -> None:
    url = str(tmp_path / "memory")
    asyncio.run(seeded(url))
    before = snapshot(tmp_path / "memory")
    shown = cli("erase", url, "people/alice.md", "--dry-run")
    assert "rewrite log/" in shown and "rewrite checkpoints/" in shown and "dry run, nothing changed" in shown
    assert "archive/alice.md" in shown, "the file's every name is shown"
    assert "and the version each rewrite replaces" in shown, "the plan counts what the result will"
    planned = _json(cli("erase", url, "people/alice.md", "--dry-run", "--json"))
    assert planned["dry_run"] and planned["erasure"] is None and planned["rewritten"]
    assert snapshot(tmp_path / "memory") == before


def test_erase_asks_and_off_a_terminal_needs_yes(tmp_path: Path) -> None:
    url = str(tmp_path / "memory")
    asyncio.run(seeded(url))
    before = snapshot(tmp_path / "memory")
    refused = cli("erase", url, "people/alice.md", expect=2)
    assert "--yes" in refused and "Nothing was changed" in refused
    assert snapshot(tmp_path / "memory") == before
    done = _json(cli("erase", url, "people/alice.md", "--yes", "--json"))
    assert done["erasure"] is not None and not done["dry_run"]
    assert not any(
        fragment.encode() in data for data in snapshot(tmp_path / "memory").values() for fragment in FRAGMENTS
    )
    log = json.loads(cli("log", url, "people/alice.md", "--json"))
    assert [entry["action"] for entry in log][:1] == ["erase"]
    assert all(entry["erased"] == done["erasure"] for entry in log if entry["action"] == "write")
    assert "(erased by" in cli("log", url, "people/alice.md")
    assert "ok" in cli("verify", url)


def test_records_erase_removes_a_deleted_records_texts(tmp_path: Path) -> None:
    url = str(tmp_path / "records")

    async def seed() -> str:
        store = LogRecordStore.local(url)
        record = await store.add(SECRET)
        await store.update(record.id, SECRET + " SECRET-EDIT-TWO")
        await store.add("another fact that stays")
        await store.delete(record.id)
        return record.id

    record_id = asyncio.run(seed())
    assert "no record" in cli("records", "erase", url, record_id[:6], "--yes", expect=3).lower()
    erased = _json(cli("records", "erase", url, record_id, "--yes", "--json"))
    assert erased["path"] == f"{record_id}.json" and erased["erasure"] is not None
    stored = snapshot(tmp_path / "records")
    assert not any(b"4242-SECRET-0001" in data or b"SECRET-EDIT-TWO" in data for data in stored.values())
    assert "another fact that stays" in cli("records", "ls", url)


@pytest.fixture
def roles() -> Iterator[object]:
    """A versioned bucket on a moto server enforcing IAM, a memory with the secret in its history, and
    the keys of an agent (the agents' policy) and an operator (the operators' policy)."""
    with iam_enforced_moto(
        "erasable",
        {
            "admin": json.dumps(
                {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}]}
            ),
            "agent": json.dumps(access_policy("erasable", ["team/"])),
            "operator": json.dumps(operator_policy("erasable", ["team/"])),
            "old-operator": json.dumps(before_erase(operator_policy("erasable", ["team/"]))),
        },
    ) as act_as:
        act_as("admin")
        import botocore.session

        botocore.session.get_session().create_client("s3").put_bucket_versioning(
            Bucket="erasable", VersioningConfiguration={"Status": "Enabled"}
        )
        asyncio.run(seeded(URL))
        yield act_as


def test_erase_needs_the_operators_grants(roles: object) -> None:
    act_as = roles
    act_as("agent")  # type: ignore[operator]
    refused = cli("erase", URL, "people/alice.md", "--yes", expect=3)
    assert "forbidden" in refused and "policy --operator" in refused
    act_as("admin")  # type: ignore[operator]
    before = every_stored_version_at(URL)
    assert leaks(before) == FRAGMENTS, "refused before anything changed"
    # An operator role from before erase came may read old versions but not delete them: refused
    # before the erasure is committed, not half-way with the texts still in old versions.
    act_as("old-operator")  # type: ignore[operator]
    refused = cli("erase", URL, "people/alice.md", "--yes", expect=3)
    assert "forbidden" in refused and "s3:DeleteObjectVersion" in refused
    act_as("admin")  # type: ignore[operator]
    assert "erase" not in [entry["action"] for entry in json.loads(cli("log", URL, "--json"))]
    act_as("operator")  # type: ignore[operator]
    cli("erase", URL, "people/alice.md", "--yes")
    act_as("admin")  # type: ignore[operator]
    assert leaks(every_stored_version_at(URL)) == []
    assert "ok" in cli("verify", URL)


async def seeded(url: str) -> None:
    async with open_store(url, options=OFTEN) as store:
        await remembered(store)
        await store.write("plain.md", "kept\n", expected=None, origin=Origin(run_id="seed"))
        await store.settle()


def before_erase(policy: dict[str, Any]) -> dict[str, Any]:
    """The operators' policy as it was before erase: without deleting old versions."""
    return {**policy, "Statement": [s for s in policy["Statement"] if s["Action"] != "s3:DeleteObjectVersion"]}


def snapshot(root: Path) -> dict[str, bytes]:
    return {path.relative_to(root).as_posix(): path.read_bytes() for path in root.rglob("*") if path.is_file()}


def _json(output: str) -> dict[str, object]:
    """The JSON document a command printed on stdout after what it showed on stderr."""
    found: dict[str, object] = json.loads(output[output.index("{\n") :])
    return found


def test_diff_shows_an_erased_version_as_erased(tmp_path: Path) -> None:
    url = str(tmp_path / "memory")
    asyncio.run(seeded(url))
    cli("erase", url, "people/alice.md", "--yes")
    writes = [e["version"] for e in json.loads(cli("log", url, "people/alice.md", "--json")) if e["action"] == "write"]
    first, second = writes[-1], writes[0]
    shown = cli("diff", url, "people/alice.md", "--from", first, "--to", second)
    assert f"people/alice.md@{first}: erased by commit" in shown and "SECRET" not in shown
    found = _json(cli("diff", url, "people/alice.md", "--from", first, "--to", second, "--json"))
    assert found["diff"] == "" and len(found["erased"]) == 2  # type: ignore[arg-type]


@pytest.mark.parametrize("path", ["../escape.md", "/etc/passwd", "a/../../b.md", "x" * 5000, "a\x00b.md"])
def test_erase_refuses_a_path_that_is_no_path(tmp_path: Path, path: str) -> None:
    url = str(tmp_path / "memory")
    asyncio.run(seeded(url))
    before = snapshot(tmp_path / "memory")
    refused = cli("erase", url, path, "--yes", expect=2)
    assert "Invalid value for 'PATH'" in refused or "invalid_path" in refused, refused
    assert snapshot(tmp_path / "memory") == before


def test_erase_prints_a_path_with_markup_as_text(tmp_path: Path) -> None:
    url = str(tmp_path / "memory")
    asyncio.run(seeded(url))
    shown = cli("erase", url, "[bold]x[/bold]<script>.md", "--dry-run", expect=3)
    assert "[bold]x[/bold]<script>.md" in shown and "not_found" in shown
