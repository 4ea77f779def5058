"""`bucket-memory init` on S3: the bucket's settings planned one by one beside what it has, then set
(`provision.init_bucket` chooses the cloud)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from a13n_harness.providers.memory import MemoryStoreError

from .objects.credentials import no_aws_credentials
from .objects.s3_errors import S3Reply
from .provision import ABORT_MULTIPART_DAYS, InitOptions, Plan, versioning_off

LIFECYCLE_RULE_ID = "expire-noncurrent-versions"
TLS_STATEMENT_ID = "DenyInsecureTransport"


def s3_lifecycle_rule(noncurrent_days: int) -> dict[str, Any]:
    return {
        "ID": LIFECYCLE_RULE_ID,
        "Status": "Enabled",
        "Filter": {},
        "NoncurrentVersionExpiration": {"NoncurrentDays": noncurrent_days},
        # A delete marker with nothing left under it hides nothing and only slows listings.
        "Expiration": {"ExpiredObjectDeleteMarker": True},
        "AbortIncompleteMultipartUpload": {"DaysAfterInitiation": ABORT_MULTIPART_DAYS},
    }


def tls_only_statement(bucket: str) -> dict[str, Any]:
    return {
        "Sid": TLS_STATEMENT_ID,
        "Effect": "Deny",
        "Principal": "*",
        "Action": "s3:*",
        "Resource": [f"arn:aws:s3:::{bucket}", f"arn:aws:s3:::{bucket}/*"],
        "Condition": {"Bool": {"aws:SecureTransport": "false"}},
    }


_PUBLIC_ACCESS_FLAGS = ("BlockPublicAcls", "IgnorePublicAcls", "BlockPublicPolicy", "RestrictPublicBuckets")


def init_s3(bucket: str, options: InitOptions, dry_run: bool) -> Plan:
    import botocore.session
    from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError, PartialCredentialsError

    s3 = botocore.session.get_session().create_client("s3")
    plan = Plan(bucket)
    try:
        exists = _s3_bucket_exists(s3, bucket)
        if exists:
            plan.keep("bucket", "exists")
        else:
            plan.change(
                "bucket", f"create in {s3.meta.region_name or 'us-east-1'}", lambda: _create_s3_bucket(s3, bucket)
            )
        _plan_s3_versioning(s3, plan, exists, options)
        _plan_s3_lifecycle(s3, plan, exists, options.noncurrent_days)
        _plan_s3_public_access(s3, plan, exists)
        _plan_s3_encryption(s3, plan, exists)
        _plan_s3_policy(s3, plan, exists, options.tls_only)
        if not dry_run:
            for step in plan.changes:
                assert step.apply is not None
                step.apply()
            plan.applied = True
    except ClientError as error:
        code = S3Reply.of(error).code
        if code in ("AccessDenied", "AllAccessDisabled"):
            raise MemoryStoreError("forbidden", f"Setting up s3://{bucket} was denied: {error}.") from None
        raise MemoryStoreError("unavailable", f"Setting up s3://{bucket} failed: {error}.") from None
    except (NoCredentialsError, PartialCredentialsError):
        raise no_aws_credentials(f"s3://{bucket}") from None
    except BotoCoreError as error:
        raise MemoryStoreError("unavailable", f"Setting up s3://{bucket} failed: {error}.") from None
    return plan


def _s3_read(exists: bool, call: Callable[[], dict[str, Any]], *absent: str) -> dict[str, Any] | None:
    """A bucket setting, or None when the bucket is yet to be made (`exists` false: no request) or S3
    answers with one of the `absent` codes (none is set)."""
    from botocore.exceptions import ClientError

    if not exists:
        return None
    try:
        return call()
    except ClientError as error:
        if S3Reply.of(error).code in absent:
            return None
        raise


def _plan_s3_versioning(s3: Any, plan: Plan, exists: bool, options: InitOptions) -> None:
    status = s3.get_bucket_versioning(Bucket=plan.bucket).get("Status") if exists else None
    if status == "Enabled":
        plan.keep("versioning", "already on")
        return
    if exists and not options.enable_versioning:
        raise versioning_off(plan.bucket)
    plan.change(
        "versioning",
        "turn on",
        lambda: s3.put_bucket_versioning(Bucket=plan.bucket, VersioningConfiguration={"Status": "Enabled"}),
    )


def _plan_s3_lifecycle(s3: Any, plan: Plan, exists: bool, noncurrent_days: int) -> None:
    found = _s3_read(
        exists, lambda: s3.get_bucket_lifecycle_configuration(Bucket=plan.bucket), "NoSuchLifecycleConfiguration"
    )
    rules: list[dict[str, Any]] = list((found or {}).get("Rules", []))
    ours = s3_lifecycle_rule(noncurrent_days)
    current = next((rule for rule in rules if rule.get("ID") == LIFECYCLE_RULE_ID), None)
    if current is not None and _same_s3_rule(current, ours):
        plan.keep("lifecycle", f"rule {LIFECYCLE_RULE_ID} in place")
        return
    others = [rule for rule in rules if rule.get("ID") != LIFECYCLE_RULE_ID]
    action = (
        f"update its own rule {LIFECYCLE_RULE_ID} to {noncurrent_days} days"
        if current is not None
        else f"add rule {LIFECYCLE_RULE_ID} (noncurrent versions {noncurrent_days} days) beside {len(others)} existing"
    )
    plan.change(
        "lifecycle",
        action,
        lambda: s3.put_bucket_lifecycle_configuration(
            Bucket=plan.bucket, LifecycleConfiguration={"Rules": [*others, ours]}
        ),
    )


def _same_s3_rule(current: dict[str, Any], ours: dict[str, Any]) -> bool:
    return (
        all(current.get(name) == ours[name] for name in ("Status", "NoncurrentVersionExpiration", "Expiration"))
        and current.get("AbortIncompleteMultipartUpload") == ours["AbortIncompleteMultipartUpload"]
    )


def _plan_s3_public_access(s3: Any, plan: Plan, exists: bool) -> None:
    found = _s3_read(
        exists, lambda: s3.get_public_access_block(Bucket=plan.bucket), "NoSuchPublicAccessBlockConfiguration"
    )
    flags = {name: False for name in _PUBLIC_ACCESS_FLAGS} | (found or {}).get("PublicAccessBlockConfiguration", {})
    off = [name for name in _PUBLIC_ACCESS_FLAGS if not flags.get(name)]
    if not off:
        plan.keep("public access", "blocked")
        return
    plan.change(
        "public access",
        f"turn on {', '.join(off)}",
        lambda: s3.put_public_access_block(
            Bucket=plan.bucket, PublicAccessBlockConfiguration=dict.fromkeys(_PUBLIC_ACCESS_FLAGS, True)
        ),
    )


def _plan_s3_encryption(s3: Any, plan: Plan, exists: bool) -> None:
    found = _s3_read(
        exists, lambda: s3.get_bucket_encryption(Bucket=plan.bucket), "ServerSideEncryptionConfigurationNotFoundError"
    )
    rules = (found or {}).get("ServerSideEncryptionConfiguration", {}).get("Rules", [])
    if rules:
        default = rules[0].get("ApplyServerSideEncryptionByDefault", {})
        key = default.get("KMSMasterKeyID")
        plan.keep("encryption", f"keep {default.get('SSEAlgorithm', 'the existing')}" + (f" with {key}" if key else ""))
        return
    plan.change(
        "encryption",
        "set AES256 by default",
        lambda: s3.put_bucket_encryption(
            Bucket=plan.bucket,
            ServerSideEncryptionConfiguration={
                "Rules": [{"ApplyServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"}}]
            },
        ),
    )


def _plan_s3_policy(s3: Any, plan: Plan, exists: bool, tls_only: bool | None) -> None:
    endpoint = str(s3.meta.endpoint_url or "")
    if tls_only is False:
        plan.keep("policy", f"TLS-only statement {TLS_STATEMENT_ID} skipped, as asked")
        return
    if tls_only is None and endpoint.startswith("http://"):
        plan.keep(
            "policy",
            f"TLS-only statement {TLS_STATEMENT_ID} skipped: {endpoint} is http://, so it would refuse every "
            "request (pass --tls-only to add it anyway)",
        )
        return
    found = _s3_read(exists, lambda: s3.get_bucket_policy(Bucket=plan.bucket), "NoSuchBucketPolicy")
    document: dict[str, Any] = json.loads(found["Policy"]) if found else {"Version": "2012-10-17", "Statement": []}
    statements = document.get("Statement", [])
    statements = [statements] if isinstance(statements, dict) else list(statements)
    ours = tls_only_statement(plan.bucket)
    current = next((statement for statement in statements if statement.get("Sid") == TLS_STATEMENT_ID), None)
    if current == ours:
        plan.keep("policy", f"statement {TLS_STATEMENT_ID} in place")
        return
    if current is not None:
        raise MemoryStoreError(
            "unavailable",
            f"The policy of bucket {plan.bucket} has a statement {TLS_STATEMENT_ID} that differs from init's "
            "(which denies every request without TLS). Rename or remove that statement, or run init with "
            "--no-tls-only; nothing was changed.",
        )
    if endpoint.startswith("http://"):
        plan.warnings.append(
            f"{endpoint} is http://: with {TLS_STATEMENT_ID} the bucket refuses every request sent there"
        )
    merged = {**document, "Statement": [*statements, ours]}
    plan.change(
        "policy",
        f"add statement {TLS_STATEMENT_ID} (deny requests without TLS) beside {len(statements)} existing",
        lambda: s3.put_bucket_policy(Bucket=plan.bucket, Policy=json.dumps(merged)),
    )


def _s3_bucket_exists(s3: Any, bucket: str) -> bool:
    from botocore.exceptions import ClientError

    try:
        s3.head_bucket(Bucket=bucket)
        return True
    except ClientError as error:
        if S3Reply.of(error).code not in ("404", "NoSuchBucket", "NotFound"):
            raise
    return False


def _create_s3_bucket(s3: Any, bucket: str) -> None:
    from botocore.exceptions import ClientError

    region = s3.meta.region_name
    configuration = (
        {} if region in (None, "us-east-1") else {"CreateBucketConfiguration": {"LocationConstraint": region}}
    )
    try:
        s3.create_bucket(Bucket=bucket, **configuration)
    except ClientError as error:
        code = S3Reply.of(error).code
        if code == "BucketAlreadyExists":
            raise MemoryStoreError("forbidden", f"The bucket name {bucket} is taken by another account.") from None
        if code != "BucketAlreadyOwnedByYou":
            raise
