"""Commands on a memory's files: ls, cat, put, rm, mv, grep, diff."""

from __future__ import annotations

import sys
from collections.abc import Awaitable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from .base import Json, Url, command, emit, err, naming, out
from .checks import as_usage, checked_path, checked_version
from .failures import EXIT_PROBLEMS, EXIT_STORE, fail
from .running import run
from .tables import Column, Wide, show
from .visible import holds_controls, visible

if TYPE_CHECKING:
    from a13n_harness.providers.memory import FileText

    from ..admin import MemoryAdmin


def _folder(text: str) -> str:
    """A folder as given on the command line (notes, notes/ or /notes/) as the store names one: "" for
    the whole memory, else ending in /."""
    folder = text.strip("/")
    return f"{folder}/" if folder else ""


def _checked_folder(value: str) -> str:
    from a13n_harness.providers.memory import FileFormat, validate_directory

    with as_usage():
        validate_directory(_folder(value), FileFormat())  # the format every command opens its store with
    return value


Path_ = Annotated[
    str,
    typer.Argument(
        help="A file's path in the memory, such as notes/tea.md.", show_default=False, callback=checked_path
    ),
]
Expected = Annotated[
    str | None,
    typer.Option(
        help="Change the file only while it is at this version (default: the version it has now).",
        callback=checked_version,
    ),
]


@command()
def ls(
    url: Url,
    prefix: Annotated[str, typer.Argument(help="Only files under this folder.", callback=_checked_folder)] = "",
    wide: Wide = False,
    as_json: Json = False,
) -> None:
    """List the files with their versions, sizes and descriptions.

    Example: bucket-memory ls s3://my-memories/team notes/
    """
    from .output import Entry

    under = _folder(prefix)
    entries = [
        Entry(path=entry.path, version=entry.version, size=entry.size, description=entry.description)
        for entry in run(lambda admin: admin.store.list(), url, read_only=True)
        if entry.path.startswith(under)
    ]

    def table() -> None:
        columns = [Column("path", "fold", share=2), Column("version"), Column("bytes"), Column("description", "cut")]
        rows = [[entry.path, entry.version, str(entry.size), entry.description or ""] for entry in entries]
        show(columns, rows, wide=wide)

    emit(entries, as_json, table)


@command()
def cat(
    url: Url,
    path: Path_,
    version: Annotated[
        str | None, typer.Option(help="The file as of this version (a commit number).", callback=checked_version)
    ] = None,
    as_json: Json = False,
) -> None:
    """Print a file, now or as of a version.

    Example: bucket-memory cat s3://my-memories/team notes/tea.md --version 3
    """
    from .output import File

    async def read(admin: MemoryAdmin) -> FileText:
        from a13n_harness.providers.memory import MemoryStoreError

        try:
            return await (admin.store.read(path) if version is None else admin.read_at(path, version))
        except MemoryStoreError as error:
            inside = f"{path}/"
            if error.code == "not_found" and any(entry.path.startswith(inside) for entry in await admin.store.list()):
                raise MemoryStoreError(
                    "not_found", f"{path} is a folder, not a file: `bucket-memory ls {url} {path}/` lists its files."
                ) from None
            raise

    found = run(read, url, read_only=True)
    emit(File(path=found.path, version=found.version, text=found.text), as_json, lambda: _write_as_is(found.text))


def _write_as_is(text: str) -> None:
    """A file's text as it is stored, which a pipe or a redirection needs byte for byte; on a
    terminal, with a warning on stderr first when it holds control characters (as `less` warns)."""
    if sys.stdout.isatty() and holds_controls(text):
        err.print(
            "warning: this file holds control characters, which your terminal acts on as printed below; "
            "`bucket-memory cat --json` shows them escaped."
        )
        err.file.flush()
    sys.stdout.write(text)


@command()
def put(
    url: Url,
    path: Path_,
    source: Annotated[
        str | None,
        typer.Argument(
            help="A local file to read the text from, or - for standard input (read when piped).", show_default=False
        ),
    ] = None,
    expected: Expected = None,
    create: Annotated[bool, typer.Option(help="Only if the file does not exist yet.")] = False,
    allow_empty: Annotated[bool, typer.Option(help="Write an empty text read from standard input.")] = False,
    as_json: Json = False,
) -> None:
    """Write a file's text, as one commit: a compare-and-swap on the version it has now.

    With no SOURCE the text comes from standard input when it is piped or redirected; an empty
    standard input is refused unless --allow-empty (a forgotten pipe would blank the file).
    Example: echo "green tea" | bucket-memory put s3://my-memories/team notes/tea.md
    """
    from .output import Written

    text = _source_text(source, allow_empty=allow_empty)
    _check_size(text, source)

    async def write(admin: MemoryAdmin) -> str:
        store, who = admin.store, naming("put", url)
        current = None if create else expected if expected is not None else await _version(admin, path)
        return await store.write(path, text, expected=current, origin=await who)

    version = run(write, url, new_ok=True, log_only=True)
    emit(Written(path=path, version=version), as_json, lambda: out.print(f"{path}: now version {version}"))


@command()
def rm(url: Url, path: Path_, expected: Expected = None, as_json: Json = False) -> None:
    """Delete a file, as one commit (undo it with restore).

    Example: bucket-memory rm s3://my-memories/team notes/old.md
    """
    from a13n_harness.providers.memory import MemoryStoreError

    from .output import Written

    async def delete(admin: MemoryAdmin) -> None:
        who = naming("rm", url)
        current = expected if expected is not None else await _version(admin, path)
        if current is None:
            raise MemoryStoreError("not_found", f"{path} does not exist.")
        await admin.store.delete(path, expected=current, origin=await who)

    run(delete, url, log_only=True)
    emit(Written(path=path, version=None), as_json, lambda: out.print(f"{path}: deleted"))


@command()
def mv(url: Url, source: Path_, destination: Path_, expected: Expected = None, as_json: Json = False) -> None:
    """Move a file to a free path, as one commit; it keeps its text and history.

    Example: bucket-memory mv s3://my-memories/team notes/tea.md notes/drinks/tea.md
    """
    from a13n_harness.providers.memory import MemoryStoreError

    from .output import Written

    async def move(admin: MemoryAdmin) -> str:
        who = naming("mv", url)
        current = expected if expected is not None else await _version(admin, source)
        if current is None:
            raise MemoryStoreError("not_found", f"{source} does not exist.")
        return await admin.store.move(source, destination, expected=current, origin=await who)

    version = run(move, url, log_only=True)
    emit(
        Written(path=destination, version=version),
        as_json,
        lambda: out.print(f"{source} -> {destination}: version {version}"),
    )


@command()
def grep(
    url: Url,
    pattern: Annotated[str, typer.Argument(help="What to look for: text, or a regular expression with --regex.")],
    path: Annotated[str, typer.Option("--path", help="Only files under this folder.", callback=_checked_folder)] = "",
    regex: Annotated[bool, typer.Option("--regex", "-E", help="Read PATTERN as a regular expression.")] = False,
    ignore_case: Annotated[bool, typer.Option("--ignore-case", "-i", help="Match regardless of case.")] = False,
    limit: Annotated[int, typer.Option(min=1, help="At most this many matching lines.")] = 100,
    as_json: Json = False,
) -> None:
    """Print the lines that match, with their files and line numbers; exit 1 when none do.

    Example: bucket-memory grep s3://my-memories/team -i "green tea"
    """
    from ..files.search import check_pattern, compile_pattern
    from .output import Match

    with as_usage("'PATTERN'"):
        check_pattern(pattern, is_regex=regex)
        compile_pattern(pattern, is_regex=regex, case_sensitive=not ignore_case)
    found, _ = run(
        lambda admin: admin.store.search(
            pattern, regex=regex, case_sensitive=not ignore_case, path=_folder(path), limit=limit
        ),
        url,
        read_only=True,
    )
    matches = [Match(path=match.path, line=match.line, text=match.text, version=match.version) for match in found]

    def lines() -> None:
        for match in matches:
            out.print(f"{match.path}:{match.line}:{match.text}")

    emit(matches, as_json, lines)
    if not matches:
        raise typer.Exit(EXIT_PROBLEMS)


@command()
def diff(
    url: Url,
    path: Path_,
    start: Annotated[str, typer.Option("--from", help="The older version.", callback=checked_version)],
    end: Annotated[
        str | None, typer.Option("--to", help="The newer version (default: now).", callback=checked_version)
    ] = None,
    as_json: Json = False,
) -> None:
    """Show how a file changed between two versions, as a unified diff.

    Example: bucket-memory diff s3://my-memories/team notes/tea.md --from 3
    """
    from ..diffs import unified_diff
    from ..state.operations import ErasedVersionError
    from .output import Diff

    erased: list[str] = []

    async def text(read: Awaitable[FileText]) -> str:
        try:
            return (await read).text
        except ErasedVersionError as error:  # shown as erased, compared as empty
            erased.append(f"{error.version}: erased by commit {error.erasure}")
            return ""

    async def texts(admin: MemoryAdmin) -> tuple[str, str]:
        before = await text(admin.read_at(path, start))
        return before, await text(admin.store.read(path) if end is None else admin.read_at(path, end))

    before, after = run(texts, url, read_only=True)
    lines = "".join(unified_diff(before, after, f"{path}@{start}", f"{path}@{end or 'now'}"))

    def human() -> None:
        for note in erased:
            err.print(f"{path}@{note}")
        sys.stdout.write(visible(lines))

    emit(Diff(path=path, start=start, end=end or "now", diff=lines, erased=erased), as_json, human)


def _check_size(text: str, source: str | None) -> None:
    """A text larger than a memory file may be, refused before anything is opened, with its size."""
    from a13n_harness.providers.memory import FileFormat

    limit, size = FileFormat().max_file_bytes, len(text.encode())
    if size > limit:
        fail(
            "too_large",
            f"{'standard input' if source in (None, '-') else source} has {size} bytes; a memory file has at most "
            f"{limit} bytes. Nothing was written.",
            hint="Split the text into several files (`bucket-memory import` writes a directory of them as one commit).",
            exit_code=EXIT_STORE,
        )


def _on_terminal() -> bool:
    return sys.stdin.isatty()


def _source_text(source: str | None, *, allow_empty: bool) -> str:
    """The text `put` writes: standard input, or a local UTF-8 file, read as stored."""
    if source is None and _on_terminal():
        raise typer.BadParameter("give a SOURCE file, or pipe the text in (- reads it from the terminal)")
    if source in (None, "-"):
        text = sys.stdin.read()
        if not text and not allow_empty:
            raise typer.BadParameter("standard input was empty; pass --allow-empty to write an empty file")
        return text
    try:
        return Path(source).read_bytes().decode("utf-8")
    except OSError as error:
        raise typer.BadParameter(f"cannot read {source}: {error.strerror or error}") from None
    except UnicodeDecodeError:
        raise typer.BadParameter(f"{source} is not UTF-8 text") from None


async def _version(admin: MemoryAdmin, path: str) -> str | None:
    """The file's version now, or None when it does not exist."""
    from a13n_harness.providers.memory import MemoryStoreError

    try:
        return (await admin.store.read(path)).version
    except MemoryStoreError as error:
        if error.code != "not_found":
            raise
        return None
