"""Issue 56: what the command line got wrong is said as such (exit 2, at once, naming the mistake),
and what the store refuses says the numbers and the way on; a hint that names a command names one
that runs as printed."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from bucket_memory.cli import EXIT_PROBLEMS, EXIT_STORE, EXIT_USAGE

from .helpers import cli

ROOT = Path(__file__).parent.parent


@pytest.mark.parametrize("url", ["s3://acme/teams/../blue", "gs://acme/teams/./blue", "s3://acme/../x"])
def test_a_relative_segment_in_a_prefix_is_a_usage_error_at_once(url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")  # nothing listens: any request would fail as 3
    printed = cli("ls", url, expect=EXIT_USAGE)
    assert "segment" in printed and "teams/blue" in printed.replace("\n", "").replace("│", ""), printed


@pytest.mark.parametrize("bucket", ["Bad_Bucket", "ab", "a..b", "-acme", "x" * 64])
def test_a_bucket_name_the_cloud_cannot_have_is_said_invalid(bucket: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")
    printed = cli("ls", f"s3://{bucket}/x", expect=EXIT_USAGE)
    assert "not a valid bucket name" in printed and "does not exist" not in printed


def test_an_unknown_profile_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "config").write_text("[profile dev]\nregion = eu-west-1\n")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "credentials"))
    printed = cli("ls", "s3://acme/teams", "--profile", "nosuch", expect=EXIT_USAGE)
    flat = " ".join(printed.replace("│", "").split())
    assert "--profile" in flat and "'nosuch'" in flat and "dev" in flat and "AWS_PROFILE" not in flat, flat


def test_a_text_too_large_says_its_size_and_the_limit(tmp_path: Path) -> None:
    url, big = str(tmp_path / "memory"), tmp_path / "big.md"
    big.write_bytes(b"a" * 14_000_000)
    printed = cli("put", url, "notes/big.md", str(big), expect=EXIT_STORE)
    assert "too_large" in printed and "14000000 bytes" in printed and "at most 65536" in printed
    assert not (tmp_path / "memory").exists()


def test_cat_of_a_folder_says_it_is_one(tmp_path: Path) -> None:
    url = str(tmp_path / "memory")
    cli("put", url, "notes/tea.md", given="green tea\n")
    for given in ("notes", "notes/"):
        printed = cli("cat", url, given.rstrip("/"), expect=EXIT_STORE)
        assert "notes is a folder" in printed and f"bucket-memory ls {url} notes/" in printed
    assert "does not exist" in cli("cat", url, "nothing", expect=EXIT_STORE)


def test_an_unversioned_bucket_is_met_with_commands_that_run_as_printed(s3_endpoint: str) -> None:
    """init refuses to adopt it without --enable-versioning (exit 2) and says the whole command;
    doctor prints no ok: line and exits 1 with a hint that runs; after it, doctor passes."""
    import botocore.session

    bucket = f"plain-{uuid.uuid4().hex[:12]}"
    botocore.session.get_session().create_client("s3").create_bucket(Bucket=bucket)
    printed = cli("init", f"s3://{bucket}", expect=EXIT_USAGE)
    given = re.search(r"`(bucket-memory init [^`]+)`", printed)
    assert given and given[1] == f"bucket-memory init s3://{bucket} --enable-versioning", printed
    cli("put", f"s3://{bucket}/team", "notes/tea.md", "--principal", "tester", given="green tea\n")
    printed = cli("doctor", f"s3://{bucket}/team", "--principal", "tester", expect=EXIT_PROBLEMS)
    assert "ok:" not in printed and "versioning is off" in printed
    hint = re.search(r"`(bucket-memory init [^`]+)`", printed)
    assert hint and hint[1] == given[1], printed
    cli(*shlex.split(hint[1])[1:])
    assert "ok:" in cli("doctor", f"s3://{bucket}/team", "--principal", "tester")


def test_a_missing_extra_is_named_with_a_command_that_installs_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """There is no `bucket-memory` on a package index: the hint names pip on a checkout (an extra
    pyproject.toml defines) or on the wheel `make dist` builds of this version."""
    import sys
    import tomllib
    from importlib.metadata import version

    monkeypatch.setitem(sys.modules, "uvicorn", None)  # import then raises ImportError
    printed = cli("browse", "/nowhere", expect=EXIT_USAGE)
    flat = " ".join(printed.split())
    assert 'pip install -e ".[browse]"' in flat and "bucket-memory[" not in flat, flat
    project = tomllib.loads((Path(__file__).parent.parent / "pyproject.toml").read_text())["project"]
    assert "browse" in project["optional-dependencies"]
    wheel = f"dist/{project['name'].replace('-', '_')}-{version('bucket-memory')}-py3-none-any.whl[browse]"
    assert wheel in flat and project["version"] == version("bucket-memory")


def test_a_write_to_an_unversioned_bucket_warns_once(s3_endpoint: str) -> None:
    import botocore.session

    from .conftest import VERSIONED

    bucket = f"plain-{uuid.uuid4().hex[:12]}"
    botocore.session.get_session().create_client("s3").create_bucket(Bucket=bucket)
    first = cli("put", f"s3://{bucket}/team", "notes/tea.md", "--principal", "tester", given="green tea\n")
    assert "versioning is off" in first and f"`bucket-memory init s3://{bucket} --enable-versioning`" in first
    again = cli("put", f"s3://{bucket}/team", "notes/tea.md", "--principal", "tester", given="black tea\n")
    assert "versioning" not in again, "once (a day), not at every write"
    versioned = cli("put", f"s3://{VERSIONED}/{uuid.uuid4().hex}", "a.md", "--principal", "tester", given="a\n")
    assert "versioning" not in versioned


@pytest.mark.parametrize(
    ("command", "says"),
    [
        # As modules in make test-slow: the same code prints, run as files below (what failed to import).
        pytest.param(["-m", "examples.agents"], "memory_file_create", marks=pytest.mark.slow),
        pytest.param(["-m", "examples.record_agents"], "memory_record_add", marks=pytest.mark.slow),
        (["examples/agents.py"], "memory_file_create"),
        (["examples/record_agents.py"], "memory_record_add"),  # failed on import: No module named 'examples'
    ],
)
def test_the_examples_say_what_they_did(command: list[str], says: str) -> None:
    """`python -m examples.agents` and `examples.record_agents` printed nothing and exited 0; run as
    files, `python examples/record_agents.py` failed on import."""
    done = subprocess.run([sys.executable, *command], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert says.split("_")[-1] in done.stdout and "temporary directory" in done.stdout, done.stdout


@pytest.mark.parametrize("command", [["-m", "examples.demo"], ["examples/demo.py"]])
def test_the_demo_starts_as_a_module_and_as_a_file(command: list[str]) -> None:
    """`python examples/demo.py` failed on import (No module named 'examples'); only `-m` ran."""
    done = subprocess.run([sys.executable, *command, "--help"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "usage:" in done.stdout, done.stderr


@pytest.mark.slow  # three minutes on two busy cores: its agents run in spawned processes
def test_the_demo_runs_whole_as_a_file() -> None:
    """Run as a file, the demo's spawned agents import it as the parent did, and it ends as `make demo` does."""
    done = subprocess.run([sys.executable, "examples/demo.py"], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr
    assert "finished after" in done.stdout and "recalled into grace's run" in done.stdout, done.stdout[-2000:]


def test_the_demos_undo_hint_runs_as_printed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`make demo` ended with "Undo it with: bucket-memory restore ...", a command on no PATH, for a
    memory gone with the demo's S3; now the hint names .venv/bin/bucket-memory and the demo runs it."""
    from examples import demo

    url = str(tmp_path / "team")
    cli("put", url, "index.md", given="first\n")
    cli("put", url, "index.md", given="second\n")
    assert Path(demo.COMMAND).name == "bucket-memory" and Path(demo.COMMAND).is_file()
    demo.show_cli(url, ["restore", url, "index.md", "--version", "1"], local=True)
    printed = capsys.readouterr().out
    assert f"$ {demo.COMMAND} restore {url}" in " ".join(printed.split()) and "stops when it ends" in printed
    assert cli("cat", url, "index.md") == "first\n"
