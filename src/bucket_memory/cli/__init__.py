"""The `bucket-memory` command: look after a memory at an s3://, gs://, file:// URL or a plain path.

`base` holds what every command shares; `failures` how a command fails; `tables` how it shows a
table; `files`, `history`, `operations`, `erase`, `records` and `browse` hold the commands; `output` the
models of their --json output.
Importing this package registers every command. The commands import the store's modules inside
their bodies: `--help` and `--version` then import neither the harness's memory package (most of
a second) nor a cloud SDK, which `test_help_and_version_import_nothing_of_the_store` holds.
"""

import os

# pydantic loads its plugins at the first model it builds, which importing the commands does:
# logfire's (the harness brings logfire) is there to trace an application's validation, costs a
# third of a second of every command's start, and would trace nothing here. It stays off unless
# PYDANTIC_DISABLE_PLUGINS says otherwise.
os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "logfire-plugin")

from . import browse, erase, files, history, operations, records
from .base import app
from .failures import EXIT_NO_MEMORY, EXIT_PROBLEMS, EXIT_STORE, EXIT_USAGE


def main() -> None:
    """The `bucket-memory` program."""
    app()


__all__ = [
    "EXIT_NO_MEMORY",
    "EXIT_PROBLEMS",
    "EXIT_STORE",
    "EXIT_USAGE",
    "app",
    "browse",
    "erase",
    "files",
    "history",
    "main",
    "operations",
    "records",
]
