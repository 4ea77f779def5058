"""How a message names the install of an extra. bucket-memory is on no package index (there is no
`bucket-memory` to fetch), so the command that runs is pip's on a checkout, or on the wheel
`make dist` builds: the README's two routes."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version


def wheel_name() -> str:
    """The file name of the wheel `make dist` builds of this version."""
    try:
        made = version("bucket-memory")
    except PackageNotFoundError:  # run from a source tree never installed
        made = "VERSION"
    return f"bucket_memory-{made}-py3-none-any.whl"


def install_hint(extra: str) -> str:
    """The commands that install `extra`, as a message ends with them."""
    return (
        f'pip install -e ".[{extra}]" in a checkout of bucket-memory, or '
        f'pip install "dist/{wheel_name()}[{extra}]" with the wheel `make dist` builds'
    )
