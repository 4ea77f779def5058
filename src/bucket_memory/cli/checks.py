"""What the command line's arguments must be, checked as click parses them: a wrong one is a usage
error (exit 2) at once, naming what is wrong, before anything is opened or asked of a cloud."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager

import typer


@contextmanager
def as_usage(param_hint: str | None = None) -> Iterator[None]:
    """The store's refusal of something the command line gave (a URL, a path, a version, a pattern)
    as a usage error, exit code 2: checked before anything is opened, it is the command line that
    is wrong."""
    from a13n_harness.providers.memory import MemoryStoreError

    try:
        yield
    except MemoryStoreError as error:
        raise typer.BadParameter(str(error), param_hint=param_hint) from None


def checked_url(value: str) -> str:
    from ..objects.urls import parse_url

    with as_usage():
        found = parse_url(value)
    if found.scheme != "file" and (refusal := _bucket_name_refusal(found.scheme, found.bucket)):
        raise typer.BadParameter(f"{found.scheme}://{ascii(found.bucket[:80])[1:-1]}: {refusal}")
    return value


# The names S3 and GCS give buckets (a GCS name with dots may be longer: up to 222 characters).
_BUCKET_NAMES = {
    "s3": re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]"),
    "gs": re.compile(r"[a-z0-9][a-z0-9_.-]{1,61}[a-z0-9]|(?=.*\.)[a-z0-9][a-z0-9_.-]{1,220}[a-z0-9]"),
}


def _bucket_name_refusal(scheme: str, bucket: str) -> str | None:
    """Why `bucket` cannot be the name of a bucket on S3 or GCS (which would answer that it does not
    exist), or None."""
    if _BUCKET_NAMES[scheme].fullmatch(bucket) and ".." not in bucket:
        return None
    allowed = "lowercase letters, digits, . and -" if scheme == "s3" else "lowercase letters, digits, _ . and -"
    return (
        f"not a valid bucket name: 3 to 63 {allowed}, starting and ending with a letter or digit, no .. "
        "(as the cloud names buckets; check the URL)"
    )


def checked_version(value: str | None) -> str | None:
    from ..admin import version_seq

    if value is not None:
        with as_usage():
            version_seq(value)
    return value


def checked_path(value: str | None) -> str | None:
    from a13n_harness.providers.memory import FileFormat

    from ..format import wire_values

    if value == "-":  # aws-cli's standard input, never a file name here
        raise typer.BadParameter("- is standard input, not a file's path: name the file, then - (`put URL PATH -`).")
    if value is not None:
        with as_usage():
            wire_values.checked_path(value, FileFormat())  # the format every command opens its store with
    return value


def checked_principal(value: str | None) -> str | None:
    from a13n_harness.providers.memory import Origin

    from ..format.wire_values import checked_origin

    if value is not None:
        with as_usage():
            checked_origin(Origin(principal_id=value))
    return value


def checked_profile(value: str | None) -> str | None:
    """A --profile that names no profile of the AWS config files, refused naming it: the SDK would
    say so later, as if AWS_PROFILE were wrong."""
    if value is None:
        return value
    import botocore.session

    known = botocore.session.Session(profile=None).available_profiles
    if value not in known:
        listed = ", ".join(sorted(known)[:10]) or "none"
        raise typer.BadParameter(
            f"no profile {value!r} in ~/.aws/config or ~/.aws/credentials (or AWS_CONFIG_FILE) (profiles there: "
            f"{listed}); `aws configure --profile {value}` makes one."
        )
    return value
