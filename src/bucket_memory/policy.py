"""The IAM grants a memory needs, as the Terraform modules write them, for `bucket-memory policy`.

`access_policy` is what agents need on S3: objects under each prefix, listing only under them,
and the bucket's KMS key through S3 when there is one. `operator_policy` adds what `recover`,
`compact`, `verify` and history read: old versions under the prefixes and the versioning status.
`gcs_condition` is the IAM condition the GCS module binds `roles/storage.objectUser` with. A test
holds each to what the modules apply.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from a13n_harness.providers.memory import MemoryStoreError

from .urls import MemoryUrl

type Policy = dict[str, Any]

# IAM reads * and ? in a resource as wildcards and ${...} as a policy variable: a prefix holding
# one would grant more than the memory.
_WIDENING = re.compile(r"[*?$]")
_KMS_KEY = re.compile(r"arn:aws[a-z-]*:kms:(?P<region>[a-z0-9-]+):[0-9]{12}:key/[A-Za-z0-9-]+")


def memory_prefixes(urls: Sequence[MemoryUrl]) -> tuple[str, list[str]]:
    """The one bucket the URLs share and each prefix with its trailing / ("" for the whole bucket)."""
    buckets = {url.bucket for url in urls}
    if len(buckets) != 1 or len({url.scheme for url in urls}) != 1:
        raise MemoryStoreError("invalid_path", "Give memories of one bucket: one policy covers one bucket.")
    prefixes: list[str] = []
    for url in urls:
        if _WIDENING.search(url.prefix):
            raise MemoryStoreError(
                "invalid_path",
                f"{url.scheme}://{url.bucket}/{url.prefix}: a prefix with *, ? or $ would grant more than the "
                "memory in IAM; rename the memory.",
            )
        prefix = f"{url.prefix}/" if url.prefix else ""
        if prefix not in prefixes:
            prefixes.append(prefix)
    return buckets.pop(), prefixes


def access_policy(bucket: str, prefixes: Sequence[str], kms_key_arn: str | None = None) -> Policy:
    """The agents' policy: read, write and list exactly what bucket-memory needs under the prefixes."""
    arn = f"arn:aws:s3:::{bucket}"
    statements: list[dict[str, Any]] = [
        {
            "Sid": "MemoryObjects",
            "Effect": "Allow",
            "Action": ["s3:GetObject", "s3:PutObject", "s3:DeleteObject"],
            "Resource": [f"{arn}/{prefix}*" for prefix in prefixes],
        },
        _listing("ListMemories", "s3:ListBucket", arn, prefixes),
    ]
    if kms_key_arn is not None:
        found = _KMS_KEY.fullmatch(kms_key_arn)
        if found is None:
            raise MemoryStoreError(
                "invalid_path",
                f"{kms_key_arn} is not a KMS key ARN (arn:aws:kms:REGION:ACCOUNT:key/ID); an alias cannot be granted.",
            )
        statements.append(
            {
                "Sid": "MemoryEncryptionKey",
                "Effect": "Allow",
                "Action": ["kms:Decrypt", "kms:GenerateDataKey"],
                "Resource": kms_key_arn,
                "Condition": {"StringEquals": {"kms:ViaService": f"s3.{found['region']}.amazonaws.com"}},
            }
        )
    return {"Version": "2012-10-17", "Statement": statements}


def operator_policy(bucket: str, prefixes: Sequence[str], kms_key_arn: str | None = None) -> Policy:
    """The operators' policy: the agents' grants, old versions under the prefixes, the versioning status."""
    arn = f"arn:aws:s3:::{bucket}"
    policy = access_policy(bucket, prefixes, kms_key_arn)
    policy["Statement"] += [
        {"Sid": "MemoryVersioningStatus", "Effect": "Allow", "Action": "s3:GetBucketVersioning", "Resource": arn},
        _listing("ListMemoryVersions", "s3:ListBucketVersions", arn, prefixes),
        {
            "Sid": "ReadMemoryVersions",
            "Effect": "Allow",
            "Action": "s3:GetObjectVersion",
            "Resource": [f"{arn}/{prefix}*" for prefix in prefixes],
        },
    ]
    return policy


def gcs_condition(bucket: str, prefixes: Sequence[str]) -> str | None:
    """The condition of the members' binding; None when a prefix is the whole bucket (no condition)."""
    if "" in prefixes:
        return None
    objects = f"projects/_/buckets/{bucket}/objects/"
    admitted = [f'resource.name.startsWith("{objects}{prefix}")' for prefix in prefixes]
    return " || ".join([*admitted, 'resource.type == "storage.googleapis.com/Bucket"'])


def _listing(sid: str, action: str, arn: str, prefixes: Sequence[str]) -> dict[str, Any]:
    return {
        "Sid": sid,
        "Effect": "Allow",
        "Action": action,
        "Resource": arn,
        "Condition": {"StringLike": {"s3:prefix": [f"{prefix}*" for prefix in prefixes]}},
    }
