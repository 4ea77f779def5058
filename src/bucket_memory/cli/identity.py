"""Who runs a command, for the origin its changes record: the cloud identity of its credentials,
or the OS user.

On S3 that is STS's GetCallerIdentity, a request and a client that cost a fifth of a second of a
command's start; the answer is kept per access key (an access key belongs to one principal) in
the user's cache directory, so a second command within the hour asks no one. An answer is kept an
hour at most, and never past the credentials' own expiry: a renamed IAM user's keys keep working
while STS names the new ARN, and a later command must record that one. The cache is as hostile as
any file: a cached principal the store refuses as an origin fails the command naming the cache.
"""

from __future__ import annotations

import getpass
import hashlib
import json
import os
import time
from datetime import datetime
from pathlib import Path

_STS_SECONDS = 3  # each of connecting and reading, once: a command does not wait long to name its caller
_REMEMBERED = 64  # access keys whose principal the cache keeps (temporary keys come and go)
_KEPT_SECONDS = 3600.0  # how long an answer is trusted: a rename shows within the hour


class CachedIdentityRefused(Exception):
    """The principal the cache holds for these credentials is one the store refuses as an origin."""


def cloud_identity(url: str) -> str | None:
    """The caller's ARN (S3, from STS or the cache) or the credentials' account (GCS); None where
    it cannot be told."""
    try:
        if url.startswith("s3://"):
            return _aws_identity()
        if url.startswith("gs://"):
            import google.auth

            credentials, _ = google.auth.default()
            account = getattr(credentials, "service_account_email", None)
            return str(account) if account else None
    except CachedIdentityRefused as refused:  # the cache is wrong, not the cloud: say which file
        from a13n_harness.providers.memory import MemoryStoreError

        raise MemoryStoreError("invalid_text", str(refused)) from None
    except Exception:  # no identity to be had (no STS, anonymous credentials): fall back, never fail a command
        return None
    return None


def os_user() -> str | None:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return None


def _aws_identity() -> str | None:
    import botocore.config
    import botocore.session

    from ..objects.s3_clients import botocore_models

    session = botocore.session.get_session()
    credentials = session.get_credentials()
    if credentials is None:
        return None
    # Where the key is valid decides who it is: the same key id at another endpoint (an emulator) is another principal.
    where = [os.environ.get(name, "") for name in ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_STS")]
    key = hashlib.sha256("\0".join([*where, credentials.access_key]).encode()).hexdigest()
    remembered = _remembered()
    if (found := _fresh(remembered.get(key))) is not None:
        return _admitted(found)
    session.register_component("data_loader", botocore_models())
    # STS names any caller from any region, but botocore wants one: with none configured
    # (a laptop, a CI runner), us-east-1, where STS's global endpoint also lives.
    sts = session.create_client(
        "sts",
        region_name=session.get_config_variable("region") or "us-east-1",
        config=botocore.config.Config(
            connect_timeout=_STS_SECONDS, read_timeout=_STS_SECONDS, retries={"total_max_attempts": 1}
        ),
    )
    arn = str(sts.get_caller_identity()["Arn"])
    _remember(remembered, key, {"arn": arn, "until": _until(credentials)})
    return arn


def _until(credentials: object) -> float:
    """When an answer for `credentials` stops being trusted: in an hour, or at their expiry if sooner
    (botocore keeps a temporary key's expiry, of a role or SSO, as `_expiry_time`)."""
    until = time.time() + _KEPT_SECONDS
    expiry = getattr(credentials, "_expiry_time", None)
    if isinstance(expiry, datetime):
        until = min(until, expiry.timestamp())
    return until


def _fresh(entry: object) -> str | None:
    """A cached principal still to be trusted, or None (expired, written by an older version as a
    bare string with no expiry, or not an entry at all)."""
    if not isinstance(entry, dict):
        return None
    arn, until = entry.get("arn"), entry.get("until")
    if not isinstance(arn, str) or not isinstance(until, (int, float)) or isinstance(until, bool):
        return None
    return arn if time.time() < until <= time.time() + _KEPT_SECONDS else None


def _admitted(arn: str) -> str:
    """A cached principal, if the store takes it as an origin; else `CachedIdentityRefused` naming the cache."""
    from a13n_harness.providers.memory import MemoryStoreError, Origin

    from ..format.wire_values import checked_origin

    try:
        checked_origin(Origin(principal_id=arn))
    except MemoryStoreError as error:
        raise CachedIdentityRefused(
            f"The principal cached for these credentials in {_cache()} is refused as an origin ({error}). "
            f"Delete {_cache()} (the next command asks STS again), or pass --principal."
        ) from None
    return arn


def cache_path(name: str) -> Path:
    """The file `name` of the user's bucket-memory cache (XDG_CACHE_HOME, else ~/.cache)."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "bucket-memory" / name


def _cache() -> Path:
    return cache_path("identities.json")


def _remembered() -> dict[str, object]:
    """The cache, as hostile as any file: anything but a JSON object reads as empty."""
    try:
        found = json.loads(_cache().read_text())
    except (OSError, ValueError, RecursionError):
        return {}
    return found if isinstance(found, dict) else {}


def _remember(remembered: dict[str, object], key: str, entry: dict[str, object]) -> None:
    """Keep `entry` (a principal and until when) for `key`, with the newest `_REMEMBERED` others
    still fresh, written whole and private; a cache that cannot be written is no error."""
    kept = {name: value for name, value in remembered.items() if name != key and _fresh(value) is not None}
    kept[key] = entry
    kept = dict(list(kept.items())[-_REMEMBERED:])
    path = _cache()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        staged = path.with_suffix(f".{os.getpid()}.tmp")
        staged.write_text(json.dumps(kept))
        staged.chmod(0o600)
        staged.replace(path)
    except OSError:
        return
