"""`bucket-memory init`: a memory bucket with the settings of the Terraform modules, for people without Terraform.

Versioning on (what `recover` reads), noncurrent versions expiring after `NONCURRENT_VERSION_DAYS`,
incomplete multipart uploads aborted after `ABORT_MULTIPART_DAYS`, public access blocked,
encryption at rest, and (on S3) a TLS-only bucket policy. A test holds the modules to these values.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from a13n_harness.providers.memory import MemoryStoreError

NONCURRENT_VERSION_DAYS = 30
ABORT_MULTIPART_DAYS = 1


@dataclass(frozen=True, slots=True)
class Provisioned:
    """What `init` did to a bucket."""

    bucket: str
    created: bool
    versioning_enabled_now: bool


def init_bucket(url: str, *, enable_versioning: bool, noncurrent_days: int = NONCURRENT_VERSION_DAYS) -> Provisioned:
    """Create the bucket of an s3:// or gs:// URL (or adopt an existing one) with the module settings.

    An existing bucket with versioning off is refused unless `enable_versioning`: turning it on
    changes what the bucket keeps and bills, so it is the owner's call.
    """
    from .urls import parse_url

    where = parse_url(url)
    if where.scheme == "s3":
        return _init_s3(where.bucket, enable_versioning, noncurrent_days)
    if where.scheme == "gs":
        return _init_gcs(where.bucket, enable_versioning, noncurrent_days)
    raise MemoryStoreError("invalid_path", f"{url}: init makes s3:// or gs:// buckets; a local path needs none.")


def s3_lifecycle(noncurrent_days: int) -> dict[str, Any]:
    return {
        "Rules": [
            {
                "ID": "expire-noncurrent-versions",
                "Status": "Enabled",
                "Filter": {},
                "NoncurrentVersionExpiration": {"NoncurrentDays": noncurrent_days},
                "AbortIncompleteMultipartUpload": {"DaysAfterInitiation": ABORT_MULTIPART_DAYS},
            }
        ]
    }


def _init_s3(bucket: str, enable_versioning: bool, noncurrent_days: int) -> Provisioned:
    import botocore.session
    from botocore.exceptions import BotoCoreError, ClientError

    s3 = botocore.session.get_session().create_client("s3")
    try:
        created = _create_s3_bucket(s3, bucket)
        versioning = s3.get_bucket_versioning(Bucket=bucket).get("Status")
        if versioning != "Enabled" and not created and not enable_versioning:
            raise _versioning_off(bucket)
        s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
        s3.put_bucket_lifecycle_configuration(Bucket=bucket, LifecycleConfiguration=s3_lifecycle(noncurrent_days))
        s3.put_public_access_block(
            Bucket=bucket,
            PublicAccessBlockConfiguration={
                "BlockPublicAcls": True,
                "IgnorePublicAcls": True,
                "BlockPublicPolicy": True,
                "RestrictPublicBuckets": True,
            },
        )
        s3.put_bucket_encryption(
            Bucket=bucket,
            ServerSideEncryptionConfiguration={
                "Rules": [{"ApplyServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"}}]
            },
        )
        s3.put_bucket_policy(Bucket=bucket, Policy=json.dumps(_tls_only(bucket)))
    except ClientError as error:
        code = error.response.get("Error", {}).get("Code", "")
        if code in ("AccessDenied", "AllAccessDisabled"):
            raise MemoryStoreError("forbidden", f"Setting up s3://{bucket} was denied: {error}.") from None
        raise MemoryStoreError("unavailable", f"Setting up s3://{bucket} failed: {error}.") from None
    except BotoCoreError as error:
        raise MemoryStoreError("unavailable", f"Setting up s3://{bucket} failed: {error}.") from None
    return Provisioned(bucket, created, versioning != "Enabled")


def _create_s3_bucket(s3: Any, bucket: str) -> bool:
    """Create the bucket; False if this account has it already (us-east-1 answers 200 to a repeat create)."""
    from botocore.exceptions import ClientError

    try:
        s3.head_bucket(Bucket=bucket)
        return False
    except ClientError as error:
        if error.response.get("Error", {}).get("Code") not in ("404", "NoSuchBucket", "NotFound"):
            raise
    region = s3.meta.region_name
    configuration = (
        {} if region in (None, "us-east-1") else {"CreateBucketConfiguration": {"LocationConstraint": region}}
    )
    try:
        s3.create_bucket(Bucket=bucket, **configuration)
    except ClientError as error:
        if error.response.get("Error", {}).get("Code") in ("BucketAlreadyOwnedByYou", "BucketAlreadyExists"):
            if error.response["Error"]["Code"] == "BucketAlreadyExists":
                raise MemoryStoreError("forbidden", f"The bucket name {bucket} is taken by another account.") from None
            return False
        raise
    return True


def _tls_only(bucket: str) -> dict[str, Any]:
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": "DenyInsecureTransport",
                "Effect": "Deny",
                "Principal": "*",
                "Action": "s3:*",
                "Resource": [f"arn:aws:s3:::{bucket}", f"arn:aws:s3:::{bucket}/*"],
                "Condition": {"Bool": {"aws:SecureTransport": "false"}},
            }
        ],
    }


def gcs_lifecycle(noncurrent_days: int) -> list[dict[str, Any]]:
    return [
        {"action": {"type": "Delete"}, "condition": {"daysSinceNoncurrentTime": noncurrent_days, "isLive": False}},
        {"action": {"type": "AbortIncompleteMultipartUpload"}, "condition": {"age": ABORT_MULTIPART_DAYS}},
    ]


def _init_gcs(bucket: str, enable_versioning: bool, noncurrent_days: int) -> Provisioned:
    from google.api_core import exceptions as api
    from google.cloud import storage

    client = storage.Client()
    try:
        try:
            existing = client.get_bucket(bucket)
        except api.NotFound:
            existing = None
        if existing is not None and not existing.versioning_enabled and not enable_versioning:
            raise _versioning_off(bucket)
        target = existing or client.bucket(bucket)
        was_on = bool(existing is not None and existing.versioning_enabled)
        target.versioning_enabled = True
        target.lifecycle_rules = gcs_lifecycle(noncurrent_days)
        target.iam_configuration.uniform_bucket_level_access_enabled = True
        target.iam_configuration.public_access_prevention = "enforced"
        if existing is None:
            client.create_bucket(target)
        else:
            target.patch()
    except (api.Forbidden, api.Unauthorized) as error:
        raise MemoryStoreError("forbidden", f"Setting up gs://{bucket} was denied: {error.message}.") from None
    except api.GoogleAPICallError as error:
        raise MemoryStoreError("unavailable", f"Setting up gs://{bucket} failed: {error.message}.") from None
    finally:
        client.close()
    return Provisioned(bucket, existing is None, not was_on)


def _versioning_off(bucket: str) -> MemoryStoreError:
    return MemoryStoreError(
        "unavailable",
        f"The bucket {bucket} exists with object versioning off, so `recover` could not bring back deleted "
        "memories. Run init again with --enable-versioning to turn it on (old versions are then kept for "
        f"{NONCURRENT_VERSION_DAYS} days and billed as storage), or choose another bucket.",
    )
