"""Helpers of the tests: a memory's log read back as an auditor would, the CLI in-process, moto set up."""

from __future__ import annotations

import functools
import importlib
import multiprocessing
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ProcessPoolExecutor
from contextlib import ExitStack, contextmanager
from typing import Any

import click.testing
import pytest
import typer.main
from a13n_harness.providers.memory import FileFormat

from bucket_memory.format.codec import Commit
from bucket_memory.format.wire_values import LOG_PREFIX, key_seq, run_seq
from bucket_memory.objects.interface import IfMatch, ObjectStore
from bucket_memory.objects.retry import retrying
from bucket_memory.state.state import State
from bucket_memory.testing.versioned import VersionedMemoryObjectStore


async def replay(objects: ObjectStore, fmt: FileFormat | None = None) -> tuple[State, list[Commit]]:
    """Every commit in the log, checked gap-free and chained, and the state they build from empty.

    Read with the store's retries: the fault-proxy tests give each request half a second, which
    an emulator on a busy machine can miss once while the test checks what was stored."""
    state = State(format=fmt or FileFormat())
    commits: list[Commit] = []
    for info in await retrying(lambda: objects.list(LOG_PREFIX), what="Listing the log to check it"):
        if run_seq(info.key) is not None:
            continue  # a copy of commits, beside them (runs.py)
        assert key_seq(info.key) == state.head + 1, f"gap or foreign key at {info.key}"
        data = await retrying(functools.partial(objects.get, info.key), what=f"Reading {info.key} to check it")
        assert data is not None
        commit = Commit.decode(objects.location, info.key, data)
        state.apply(commit, objects.location)
        commits.append(commit)
    return state, commits


class CliRunner(click.testing.CliRunner):
    """typer's test runner, but with the app's click command made once: typer's makes it again at
    every invocation, 90 ms of CPU that the hundreds of commands `make test` runs each paid."""

    def invoke(self, app: typer.Typer, *arguments: Any, **options: Any) -> click.testing.Result:  # type: ignore[override]
        return super().invoke(_click_command(app), *arguments, **options)


_click_command = functools.cache(typer.main.get_command)


def cli(*arguments: str, expect: int = 0, given: str | None = None) -> str:
    """Run the `bucket-memory` command in this process; what it printed, stdout and stderr together."""
    from bucket_memory.cli import app

    result = CliRunner().invoke(app, list(arguments), input=given, env={"COLUMNS": "400"})
    assert result.exit_code == expect, f"exit {result.exit_code}: {result.output}"
    return result.output


def point_at_moto(environment: pytest.MonkeyPatch, endpoint: str, key: str = "setup") -> None:
    """The standard AWS environment for a moto server: its endpoint, a key pair, a region."""
    environment.setenv("AWS_ENDPOINT_URL", endpoint)
    environment.setenv("AWS_ACCESS_KEY_ID", key)
    environment.setenv("AWS_SECRET_ACCESS_KEY", key)
    environment.setenv("AWS_DEFAULT_REGION", "us-east-1")
    environment.delenv("AWS_PROFILE", raising=False)


@contextmanager
def iam_enforced_moto(bucket: str, policies: Mapping[str, str]) -> Iterator[Callable[[str], None]]:
    """A moto server that enforces IAM once `bucket` and a user per policy (name to policy document)
    exist, with the environment pointing at it; yields `act_as(user)`, which puts that user's keys
    in the environment."""
    import botocore.session

    from bucket_memory.testing.emulators import moto_server

    setup_actions = 1 + 3 * len(policies)  # the bucket, then a user, its policy and its access key each
    with moto_server(enforce_iam_after=setup_actions) as endpoint, pytest.MonkeyPatch.context() as environment:
        point_at_moto(environment, endpoint)
        session = botocore.session.get_session()
        session.create_client("s3").create_bucket(Bucket=bucket)
        iam = session.create_client("iam")
        keys = {}
        for user, document in policies.items():
            iam.create_user(UserName=user)
            iam.put_user_policy(UserName=user, PolicyName="memory", PolicyDocument=document)
            keys[user] = iam.create_access_key(UserName=user)["AccessKey"]

        def act_as(user: str) -> None:
            environment.setenv("AWS_ACCESS_KEY_ID", keys[user]["AccessKeyId"])
            environment.setenv("AWS_SECRET_ACCESS_KEY", keys[user]["SecretAccessKey"])

        yield act_as


def _imported(module: str) -> None:
    importlib.import_module(module)


@contextmanager
def fresh_processes(count: int, *, importing: str) -> Iterator[list[ProcessPoolExecutor]]:
    """`count` new spawned processes (one per call a test makes, so that each call is another
    process), started together: their imports of `importing`, most of a call's time, overlap."""
    context = multiprocessing.get_context("spawn")
    with ExitStack() as stack:
        pools = [stack.enter_context(ProcessPoolExecutor(1, mp_context=context)) for _ in range(count)]
        for started in [pool.submit(_imported, importing) for pool in pools]:
            started.result(timeout=180)
        yield pools


async def overwrite(objects: VersionedMemoryObjectStore, key: str, data: bytes) -> None:
    """Put `data` over the current version of `key`, as an agent with PutObject overwrites a commit."""
    await objects.put(key, data, IfMatch((await objects.list_versions(key))[-1].tag))
