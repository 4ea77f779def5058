"""The IAM grants a memory needs, as the Terraform modules write them, for `bucket-memory policy`.

`access_policy` is what agents need on S3: objects under each prefix, listing only under them,
and the bucket's KMS key through S3 when there is one, but never creating or deleting an erasure
record under any memory's `erasures/` (an explicit Deny). `operator_policy` has the same object
grants without that Deny, and adds what `recover`, `compact`, `verify`, `erase` and history need:
old versions under the prefixes (reading them, and deleting them for `erase`) and the versioning
status. On GCS, `gcs_condition` admits the objects under the prefixes (agents read, operators
read and write them) and `gcs_write_condition` those agents may write. A test holds each to what
the modules apply.

With a tenant tag (`tenant_prefixes`), each S3 grant is of `<prefix>${aws:PrincipalTag/NAME}/`
instead: one role serves every tenant, and a session (AssumeRole or TagSession tagged NAME=alice)
reaches only the memory under `<prefix>alice/`; two Denies refuse a session whose tag is missing
or names no single segment of its own (`b/c`, `..`, a folder a memory keeps). GCS conditions can
name nothing of the caller, so there a tenant tag is refused (`GCS_TENANT_LIMIT`).

Each refuses a bucket or prefix the Terraform modules' validation refuses: the rules below are
theirs (a test reads them out of variables.tf), so that nothing but letters, digits and `_ . = - /`
reaches a document. IAM reads * and ? in a resource as wildcards and ${...} as a policy variable,
and a quote or backslash would end a condition's string and let the rest be read as CEL: either
would grant more than the memory.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any, Literal

from a13n_harness.providers.memory import MemoryStoreError

from .format.wire_values import ERASURES_PREFIX, RESERVED_FOLDERS, intent_key
from .objects.urls import MemoryUrl

type Policy = dict[str, Any]

# The Terraform modules' rules, written as they write them.
SEGMENT_CHARACTER = "[A-Za-z0-9_.=-]"
PREFIX_PATTERN = f"^({SEGMENT_CHARACTER}+(/{SEGMENT_CHARACTER}+)*)?/?$"
REFUSED_SEGMENTS = (".", "..", *RESERVED_FOLDERS)
# An object key is at most 1024 bytes, and a memory's longest key adds /pending/<made>-<base>-<id>.json.
MAX_PREFIX_CHARS = 1024 - len("/" + intent_key(0, 0, "0" * 32))
BUCKET_PATTERNS = {
    "s3": "^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$",
    "gs": "^[a-z0-9][a-z0-9_.-]{1,61}[a-z0-9]$",
}
_ALLOWED = "a prefix is path segments of ASCII letters, digits and _ . = - joined by /, such as teams/blue"
# AWS's tag key characters less the space and /, so that nothing ends or nests the ${...} variable.
TENANT_TAG_PATTERN = "^[A-Za-z0-9_.:=+@-]{1,128}$"
# Tag values that name no memory of the tenant's own under a prefix: none, several segments (a
# memory nested under another tenant's), relative ones, or a folder a memory at the prefix keeps.
HOSTILE_TENANTS = ["", "*/*", ".", "..", *RESERVED_FOLDERS, "pending", "doctor"]
GCS_TENANT_LIMIT = (
    "GCS IAM conditions can compare only the object's name, the resource type and the request time, "
    "nothing of the caller, so a grant cannot follow a tag: grant each tenant's service account its own "
    "prefix (`bucket-memory policy gs://BUCKET/PREFIX/TENANT`), or give each tenant a bucket."
)
_KMS_KEY = re.compile(r"arn:aws[a-z-]*:kms:(?P<region>[a-z0-9-]+):[0-9]{12}:key/[A-Za-z0-9-]+")


def memory_prefixes(urls: Sequence[MemoryUrl]) -> tuple[str, list[str]]:
    """The one bucket the URLs share and each prefix with its trailing / ("" for the whole bucket)."""
    buckets = {url.bucket for url in urls}
    if len(buckets) != 1 or len({url.scheme for url in urls}) != 1:
        raise MemoryStoreError("invalid_path", "Give memories of one bucket: one policy covers one bucket.")
    prefixes: list[str] = []
    for url in urls:
        prefix = f"{url.prefix}/" if url.prefix else ""
        if prefix not in prefixes:
            prefixes.append(prefix)
    return buckets.pop(), prefixes


def access_policy(
    bucket: str, prefixes: Sequence[str], kms_key_arn: str | None = None, *, tenant_tag: str | None = None
) -> Policy:
    """The agents' policy: read, write and list exactly what bucket-memory needs under the prefixes
    (each tenant's own under them, with `tenant_tag`), but never create or delete an erasure record
    or a destroy's proof (the operator's word that an erasure, or a destroy, is one)."""
    arn = f"arn:aws:s3:::{bucket}"
    granted = tenant_prefixes(bucket, prefixes, tenant_tag)
    policy = _objects_policy(bucket, granted, kms_key_arn)
    policy["Statement"].append(
        {
            # An explicit Deny outweighs every Allow, this policy's and any other the agent holds.
            "Sid": "OnlyOperatorsWriteErasureRecords",
            "Effect": "Deny",
            "Action": ["s3:PutObject", "s3:DeleteObject"],
            "Resource": [f"{arn}/{key}" for key in erasure_record_patterns(granted)],
        }
    )
    policy["Statement"] += _tenant_guards(bucket, tenant_tag)
    return policy


def tenant_prefixes(bucket: str, prefixes: Sequence[str], tenant_tag: str | None) -> list[str]:
    """The S3 prefixes a policy grants, each checked: `prefixes` themselves, or with `tenant_tag`
    the memory of the session's tenant under each (`<prefix>${aws:PrincipalTag/NAME}/`)."""
    check_grantable("s3", bucket, prefixes)
    if tenant_tag is None:
        return list(prefixes)
    check_tenant_tag(tenant_tag)
    return [f"{prefix}${{aws:PrincipalTag/{tenant_tag}}}/" for prefix in prefixes]


def check_tenant_tag(tenant_tag: str) -> None:
    """Refuse a tag key that could end or nest the policy variable it is put in, or that AWS reserves."""
    if re.fullmatch(TENANT_TAG_PATTERN, tenant_tag) is None or tenant_tag.lower().startswith("aws:"):
        raise MemoryStoreError(
            "invalid_path",
            f"{_shown(tenant_tag)!r} cannot be a tenant tag: 1 to 128 ASCII letters, digits and _ . : = + @ -, "
            "not starting with aws: (such as tenant).",
        )


def _tenant_guards(bucket: str, tenant_tag: str | None) -> list[dict[str, Any]]:
    """With a tenant tag, the Denies that refuse a session whose tag is missing or is no one
    segment of its own (`HOSTILE_TENANTS`): whoever tags sessions (AssumeRole, TagSession) could
    otherwise reach another tenant's nested memory, or the folders of a memory at the prefix."""
    if tenant_tag is None:
        return []
    variable = f"aws:PrincipalTag/{tenant_tag}"
    resources = [f"arn:aws:s3:::{bucket}", f"arn:aws:s3:::{bucket}/*"]
    refused = {"Effect": "Deny", "Action": "s3:*", "Resource": resources}
    return [
        {"Sid": "TenantTagIsSet", **refused, "Condition": {"Null": {variable: "true"}}},
        {"Sid": "TenantTagIsOneSegment", **refused, "Condition": {"StringLike": {variable: HOSTILE_TENANTS}}},
    ]


def erasure_record_patterns(prefixes: Sequence[str]) -> list[str]:
    """The keys, as IAM wildcards, of the erasure records of every memory an agent of `prefixes` could
    write to: each prefix's own, and those of memories nested under it (`*` spans `/`). No other key
    a memory writes matches: none has an `erasures` segment but the records (a prefix may not)."""
    own, nested = f"{ERASURES_PREFIX}*", f"*/{ERASURES_PREFIX}*"
    return [prefix + pattern for prefix in prefixes for pattern in (own, nested)]


def operator_policy(
    bucket: str, prefixes: Sequence[str], kms_key_arn: str | None = None, *, tenant_tag: str | None = None
) -> Policy:
    """The operators' policy: the agents' object grants without their Deny (so operators create and
    delete erasure records and a destroy's proof), old versions under the prefixes (read, and
    deleted by `erase` and `destroy`), the versioning status; with `tenant_tag`, of the session's tenant."""
    arn = f"arn:aws:s3:::{bucket}"
    prefixes = tenant_prefixes(bucket, prefixes, tenant_tag)
    policy = _objects_policy(bucket, prefixes, kms_key_arn)
    policy["Statement"] += [
        {"Sid": "MemoryVersioningStatus", "Effect": "Allow", "Action": "s3:GetBucketVersioning", "Resource": arn},
        _listing("ListMemoryVersions", "s3:ListBucketVersions", arn, prefixes),
        {
            "Sid": "ReadMemoryVersions",
            "Effect": "Allow",
            "Action": "s3:GetObjectVersion",
            "Resource": [f"{arn}/{prefix}*" for prefix in prefixes],
        },
        {
            "Sid": "EraseMemoryVersions",
            "Effect": "Allow",
            "Action": "s3:DeleteObjectVersion",
            "Resource": [f"{arn}/{prefix}*" for prefix in prefixes],
        },
    ]
    policy["Statement"] += _tenant_guards(bucket, tenant_tag)
    return policy


def _objects_policy(bucket: str, prefixes: Sequence[str], kms_key_arn: str | None) -> Policy:
    """What agents and operators both hold: objects under each prefix (checked), listing only under
    them, and the bucket's KMS key through S3 when there is one."""
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


def gcs_condition(bucket: str, prefixes: Sequence[str]) -> str | None:
    """The condition that admits objects under the prefixes and the bucket (listing is checked on it):
    of the agents' `roles/storage.objectViewer` binding and the operators' `roles/storage.objectUser`
    binding. None when a prefix is the whole bucket (no condition)."""
    check_grantable("gs", bucket, prefixes)
    if "" in prefixes:
        return None
    objects = f"projects/_/buckets/{bucket}/objects/"
    admitted = [f"resource.name.startsWith({_cel_string(objects + prefix)})" for prefix in prefixes]
    return " || ".join([*admitted, f"resource.type == {_cel_string('storage.googleapis.com/Bucket')}"])


def gcs_write_condition(bucket: str, prefixes: Sequence[str]) -> str:
    """The condition of the agents' `roles/storage.objectUser` binding: objects under the prefixes but
    under none of their `erasures/`, which only operators create or delete. IAM conditions can only
    compare `resource.name`'s start and end, so a memory nested under a prefix, and not among
    `prefixes` itself, is not covered: its `erasures/` is writable by its parent's agents."""
    check_grantable("gs", bucket, prefixes)
    objects = f"projects/_/buckets/{bucket}/objects/"
    admitted = " || ".join(f"resource.name.startsWith({_cel_string(objects + prefix)})" for prefix in prefixes)
    refused = [f"!resource.name.startsWith({_cel_string(objects + prefix + ERASURES_PREFIX)})" for prefix in prefixes]
    return " && ".join([f"({admitted})", *refused])


def _cel_string(text: str) -> str:
    # The checks leave no quote or backslash to escape; should one come, JSON escapes it as CEL does.
    return json.dumps(text)


def check_grantable(scheme: Literal["s3", "gs"], bucket: str, prefixes: Sequence[str]) -> None:
    """Refuse a bucket or prefix (each with its trailing /) that the Terraform modules refuse,
    naming the memory, what is wrong and what is allowed."""
    if _bucket_refused(scheme, bucket):
        rule = "_ . and -" if scheme == "gs" else ". and - (no ..)"
        raise MemoryStoreError(
            "invalid_path",
            f"{scheme}://{_shown(bucket)}: not a bucket an IAM grant can name: 3 to 63 lowercase letters, digits, "
            f"{rule}, starting and ending with a letter or digit{', not with goog' if scheme == 'gs' else ''}.",
        )
    for prefix in prefixes:
        if refusal := _prefix_refusal(prefix):
            memory = f"{scheme}://{bucket}/{_shown(prefix.removesuffix('/'))}"
            raise MemoryStoreError("invalid_path", f"{memory}: {refusal}; rename the memory to grant it.")


def _bucket_refused(scheme: Literal["s3", "gs"], bucket: str) -> bool:
    if re.fullmatch(BUCKET_PATTERNS[scheme], bucket) is None:
        return True
    return ".." in bucket if scheme == "s3" else bucket.startswith("goog")


def _prefix_refusal(prefix: str) -> str | None:
    if re.fullmatch(PREFIX_PATTERN, prefix) is None:
        for character in prefix:
            if character != "/" and re.fullmatch(SEGMENT_CHARACTER, character) is None:
                return f"{character!a} (U+{ord(character):04X}) cannot be in a prefix IAM grants: {_ALLOWED}"
        return f"a prefix has no empty segment (no leading / and no //): {_ALLOWED}"
    stem = prefix.removesuffix("/")
    for segment in stem.split("/"):
        if segment in REFUSED_SEGMENTS:
            return (
                f"{segment!r} cannot be a segment of a prefix IAM grants (nor can any of . and .., which are "
                "relative, and log, checkpoints and erasures, the folders a memory keeps its objects in)"
            )
    if len(stem) > MAX_PREFIX_CHARS:
        return (
            f"a prefix IAM grants is at most {MAX_PREFIX_CHARS} characters, for a memory's keys to fit in 1024 "
            f"bytes; this one has {len(stem)}"
        )
    return None


def _shown(text: str) -> str:
    """`text` with whatever is not printable ASCII escaped, so that a message shows what was given."""
    return ascii(text)[1:-1]


def _listing(sid: str, action: str, arn: str, prefixes: Sequence[str]) -> dict[str, Any]:
    return {
        "Sid": sid,
        "Effect": "Allow",
        "Action": action,
        "Resource": arn,
        "Condition": {"StringLike": {"s3:prefix": [f"{prefix}*" for prefix in prefixes]}},
    }
