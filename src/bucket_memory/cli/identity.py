"""Who runs a command, for the origin its changes record: the cloud identity of its credentials,
or the OS user.

On S3 that is STS's GetCallerIdentity, a request and a client that cost a fifth of a second of a
command's start; the answer is kept per access key (an access key belongs to one principal) in
the user's cache directory, so a second command asks no one.
"""

from __future__ import annotations

import getpass
import hashlib
import json
import os
from pathlib import Path

_STS_SECONDS = 3  # each of connecting and reading, once: a command does not wait long to name its caller
_REMEMBERED = 64  # access keys whose principal the cache keeps (temporary keys come and go)


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

    from ..objects.s3 import botocore_models

    session = botocore.session.get_session()
    credentials = session.get_credentials()
    if credentials is None:
        return None
    # Where the key is valid decides who it is: the same key id at another endpoint (an emulator) is another principal.
    where = [os.environ.get(name, "") for name in ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_STS")]
    key = hashlib.sha256("\0".join([*where, credentials.access_key]).encode()).hexdigest()
    remembered = _remembered()
    if isinstance(found := remembered.get(key), str):
        return found
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
    _remember(remembered, key, arn)
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


def _remember(remembered: dict[str, object], key: str, arn: str) -> None:
    """Keep `arn` for `key` (the newest `_REMEMBERED`), written whole and private; a cache that
    cannot be written is no error."""
    kept = {name: value for name, value in remembered.items() if name != key}
    kept[key] = arn
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
