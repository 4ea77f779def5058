"""What S3's error replies mean, whichever client sent the request (aiobotocore or obstore)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from a13n_harness.providers.memory import MemoryStoreError

from .interface import TransientError

_TRANSIENT_CODES = frozenset(
    {"SlowDown", "Throttling", "ThrottlingException", "RequestTimeout", "InternalError", "ServiceUnavailable"}
)


@dataclass(frozen=True, slots=True)
class S3Reply:
    """What an error reply that botocore parsed says: its S3 error code, HTTP status and message."""

    code: str
    status: int
    message: str | None

    @classmethod
    def of(cls, error: Any) -> S3Reply:
        """The reply of a botocore `ClientError`."""
        details = error.response.get("Error", {})
        status = error.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0)
        return cls(details.get("Code", ""), status, details.get("Message"))


class Missing(Exception):
    """The key a request named does not exist (404): a read's None, or a wrong endpoint."""


class Exists(Exception):
    """A conditional put found its condition false (412): the mode's refusal."""


def s3_error(code: str, status: int, where: str, message: str | None, history: bool = False) -> Exception:
    """What an S3 error reply means for the store: a `MemoryStoreError` to report, or a
    `TransientError` to retry. `history` requests read old versions, which need permissions of their own."""
    bucket = where.removeprefix("s3://").split("/", 1)[0]
    if code == "NoSuchBucket":
        return MemoryStoreError("unavailable", f"The bucket {bucket} does not exist: create it or fix the URL.")
    if code in ("InvalidAccessKeyId", "SignatureDoesNotMatch", "ExpiredToken", "InvalidToken"):
        return MemoryStoreError(
            "forbidden",
            f"S3 refused the AWS credentials for {where} ({code}): check the access key, secret, session "
            "token or profile the standard chain found.",
        )
    if history and (code in ("AccessDenied", "AllAccessDisabled") or status == 403):
        return MemoryStoreError(
            "forbidden",
            f"Using old versions under {where} was denied ({code or status}). recover needs "
            f"s3:ListBucketVersions and s3:GetBucketVersioning on bucket {bucket} and s3:GetObjectVersion on the "
            "prefix, erase s3:DeleteObjectVersion too, beside what agents have: the Terraform module's "
            "operator_policy_json (or `bucket-memory policy --operator`) grants them.",
        )
    if code in ("AccessDenied", "AllAccessDisabled") or status == 403:
        return MemoryStoreError(
            "forbidden",
            f"Access to {where} was denied ({code or status}). The store needs s3:GetObject, s3:PutObject and "
            f"s3:DeleteObject on the prefix and s3:ListBucket on bucket {bucket} (without it S3 answers 403 for "
            "a missing key).",
        )
    if code in _TRANSIENT_CODES or code == "ConditionalRequestConflict" or status in (408, 409, 429) or status >= 500:
        return TransientError(f"{code or status}: {message or ''}")
    return MemoryStoreError(
        "unavailable", f"S3 refused a request for {where}: {code or status} {message or ''}".strip()
    )


def s3_client_error(error: Exception, location: str) -> MemoryStoreError:
    """Why no S3 client could be made: a profile that does not exist, or settings botocore refused."""
    from botocore.exceptions import ProfileNotFound

    if isinstance(error, ProfileNotFound):
        return MemoryStoreError("forbidden", f"{error}: name a profile from ~/.aws/config in AWS_PROFILE, or unset it.")
    return MemoryStoreError("unavailable", f"Cannot make an S3 client for {location}: {error}. Check the AWS settings.")


def wrong_endpoint(location: str, key: str) -> MemoryStoreError:
    """A 404 where the request names no object that could be missing: the endpoint or bucket is wrong."""
    return MemoryStoreError(
        "unavailable",
        f"{location} answered 404 to a request for {key or 'the bucket'}: the endpoint or bucket "
        "name is wrong (check AWS_ENDPOINT_URL and the URL).",
    )
