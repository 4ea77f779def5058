"""Running a command's work on the memory its URL names: the store opened as the command needs it
(read-only, through obstore, with a check of the bucket's versioning beside a change), on every
memory under a URL for `--all`, until Ctrl-C; and a store's error as a failure with exit code 3."""

from __future__ import annotations

import asyncio
import importlib.util
from collections.abc import Awaitable, Callable, Coroutine, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Literal

import click
import typer

from . import interrupts, versioning
from .base import err, progress
from .failures import EXIT_NO_MEMORY, EXIT_STORE, fail

if TYPE_CHECKING:
    from a13n_harness.providers.memory import MemoryStoreError

    from ..admin import MemoryAdmin
    from ..fanout import Outcome


class _NoMemory(Exception):
    """The URL names a place where no memory was ever written."""


def run[T](
    work: Callable[[MemoryAdmin], Awaitable[T]],
    url: str,
    *,
    read_only: bool = False,
    new_ok: bool = False,
    log_only: bool = False,
    says_versioning: bool = False,
) -> T:
    """Open the memory, run `work` on it, and turn a store error into a message and exit code 3.

    A command that only reads opens the store `read_only`, so it needs only read permissions, and
    reaches S3 through obstore where the `fast` extra is installed: equal on deadlines and errors,
    it never creates, and it starts in a third less CPU (`docs/decisions/021-s3-layers.md`); so does
    one that writes through the log's own operations alone (`log_only`: put, rm, mv), which never
    touches stored versions. Unless `new_ok`, a URL where nothing was ever written is exit code 4
    (a mistyped URL). A change reads the bucket's versioning beside its work, and warns when it is
    off (`versioning.py`: once a day a bucket; through aiobotocore, which reads it), unless the
    command `says_versioning` itself."""
    from ..admin import MemoryAdmin
    from ..connect import open_store

    checking = not read_only and not says_versioning and versioning.to_check(url)
    fast = (read_only or (log_only and not checking)) and importlib.util.find_spec("obstore") is not None
    layer: Literal["aiobotocore", "obstore"] = "obstore" if fast else "aiobotocore"

    async def opened() -> T:
        with interrupts.cancelled_on_interrupt():
            async with open_store(url, read_only=read_only, s3_layer=layer) as store:
                if not new_ok and not await store.begun():  # a deleted memory is `memory_deleted`
                    raise _NoMemory
                admin = MemoryAdmin(store)
                if not checking:
                    return await _accounted(work, admin)
                warning = asyncio.create_task(versioning.warn_if_off(admin, url))
                try:
                    result = await _accounted(work, admin)
                except BaseException:
                    warning.cancel()
                    raise
                _warn(*await asyncio.gather(warning, return_exceptions=True))
                return result

    if not read_only:
        interrupts.changing(url)
    with store_errors():
        try:
            return _interruptible(opened)
        except _NoMemory:
            fail(
                "no_memory",
                f"no memory at {url}: nothing was ever written there.",
                hint="Check the URL (`bucket-memory memories s3://bucket` lists the memories in a bucket).",
                exit_code=EXIT_NO_MEMORY,
            )


def run_each[T](
    work: Callable[[MemoryAdmin], Awaitable[T]], url: str, concurrency: int, *, read_only: bool = True
) -> list[Outcome[T]]:
    """`work` on every memory under `url`, `concurrency` at a time, a progress bar counting
    memories; a memory's store error is its outcome, not the command's."""
    from ..fanout import each_memory

    async def each() -> list[Outcome[T]]:
        with interrupts.cancelled_on_interrupt(), progress("memories") as advance:
            return await each_memory(url, work, concurrency=concurrency, progress=advance, read_only=read_only)

    with store_errors():
        return _interruptible(each)


async def _accounted[T](work: Callable[[MemoryAdmin], Awaitable[T]], admin: MemoryAdmin) -> T:
    """`work(admin)`; however it ends, the intents it published and never saw settled are noted,
    so that an interrupt does not say "nothing was changed" of a write another writer may still fold."""
    try:
        return await work(admin)
    finally:
        interrupts.unsettled(admin.store.unsettled_intents())


def _warn(found: str | BaseException | None) -> None:
    """The versioning warning a change's check found, if any (a check that failed says nothing:
    the command's own outcome is what matters)."""
    if isinstance(found, str):
        err.print(found)


def _interruptible[T](work: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """`asyncio.run(work())`; once Ctrl-C cancelled it, whatever it raised as it unwound is the
    interrupt (main() says what landed)."""
    try:
        return asyncio.run(work())
    except BaseException:
        if interrupts.interrupted():
            raise KeyboardInterrupt from None
        raise


@contextmanager
def store_errors() -> Iterator[None]:
    """A store error becomes a failure with its code and message, and exit code 3."""
    from a13n_harness.providers.memory import MemoryStoreError

    try:
        yield
    except MemoryStoreError as error:
        fail(error.code, str(error), hint=_hint(error), exit_code=EXIT_STORE)
    except (click.ClickException, typer.Exit, typer.Abort, KeyboardInterrupt, BrokenPipeError):
        raise  # a usage error keeps its exit code 2; an interrupt and a closed pipe are main()'s
    except Exception as error:  # a failure nobody mapped: still a message and exit code 3, not a traceback
        fail(
            "unexpected",
            f"{type(error).__name__}: {error}",
            hint="bucket-memory did not expect this failure: if it persists, report it with its command line.",
            exit_code=EXIT_STORE,
        )


def _hint(error: MemoryStoreError) -> str | None:
    """What the command line adds to a store's message: for a file found at another version, the
    option that changes it at that version."""
    if error.code != "version_mismatch" or error.current is None:
        return None
    found = error.current
    return (
        f"Pass --expected {found.version} to change it only while it is at version {found.version} "
        f"(`bucket-memory log URL {found.path}` shows who changed it)."
    )
