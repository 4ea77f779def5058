"""`bucket-memory init`: a memory bucket with the settings of the Terraform modules, for people without Terraform.

Versioning on (what `recover` reads), noncurrent versions expiring after `NONCURRENT_VERSION_DAYS`,
delete markers expiring once no version is left under them (on S3), incomplete multipart uploads
aborted after `ABORT_MULTIPART_DAYS`, public access blocked, encryption at rest, (on S3) a TLS-only
bucket policy, and (on a new GCS bucket) soft delete off. A test holds the modules to these values.

On a bucket that exists, init adds its settings beside what is there and never removes anything:
its lifecycle rule and policy statement join the existing ones (each known by its ID), existing
default encryption is kept, and a setting it cannot merge is refused with a message. It first
makes a plan of every step, which `dry_run` shows without changing anything.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from a13n_harness.providers.memory import MemoryStoreError

from .objects.credentials import no_aws_credentials, no_google_credentials

NONCURRENT_VERSION_DAYS = 30
ABORT_MULTIPART_DAYS = 1
LIFECYCLE_RULE_ID = "expire-noncurrent-versions"
TLS_STATEMENT_ID = "DenyInsecureTransport"


@dataclass(frozen=True, slots=True)
class Step:
    """One setting of the bucket: what init does to it, or why it leaves it (`apply` None)."""

    setting: str
    action: str
    apply: Callable[[], None] | None = None


@dataclass(slots=True)
class Plan:
    """What init does to one bucket, step by step; `applied` once it has been carried out."""

    bucket: str
    steps: list[Step] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    applied: bool = False

    @property
    def changes(self) -> list[Step]:
        return [step for step in self.steps if step.apply is not None]

    def keep(self, setting: str, why: str) -> None:
        self.steps.append(Step(setting, why))

    def change(self, setting: str, action: str, apply: Callable[[], None]) -> None:
        self.steps.append(Step(setting, action, apply))


@dataclass(frozen=True, slots=True)
class InitOptions:
    """What init is asked for: `tls_only` None means on, except against an http:// endpoint (a local
    emulator), where a TLS-only policy would refuse every request."""

    enable_versioning: bool = False
    noncurrent_days: int = NONCURRENT_VERSION_DAYS
    tls_only: bool | None = None
    project: str | None = None
    location: str | None = None
    kms_key: str | None = None


def init_bucket(url: str, options: InitOptions, *, dry_run: bool = False) -> Plan:
    """Plan the settings of the bucket an s3:// or gs:// URL names, then carry the plan out unless `dry_run`.

    An existing bucket with versioning off is refused unless `enable_versioning`: turning it on
    changes what the bucket keeps and bills, so it is the owner's call.
    """
    from .objects.urls import parse_url

    where = parse_url(url)
    if where.scheme == "s3":
        return _init_s3(where.bucket, options, dry_run)
    if where.scheme == "gs":
        return _init_gcs(where.bucket, options, dry_run)
    raise MemoryStoreError("invalid_path", f"{url}: init makes s3:// or gs:// buckets; a local path needs none.")


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


def _init_s3(bucket: str, options: InitOptions, dry_run: bool) -> Plan:
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
        code = error.response.get("Error", {}).get("Code", "")
        if code in ("AccessDenied", "AllAccessDisabled"):
            raise MemoryStoreError("forbidden", f"Setting up s3://{bucket} was denied: {error}.") from None
        raise MemoryStoreError("unavailable", f"Setting up s3://{bucket} failed: {error}.") from None
    except (NoCredentialsError, PartialCredentialsError):
        raise no_aws_credentials(f"s3://{bucket}") from None
    except BotoCoreError as error:
        raise MemoryStoreError("unavailable", f"Setting up s3://{bucket} failed: {error}.") from None
    return plan


def _s3_read(call: Callable[[], dict[str, Any]], *absent: str) -> dict[str, Any] | None:
    """A bucket setting, or None when S3 answers with one of the `absent` codes (none is set)."""
    from botocore.exceptions import ClientError

    try:
        return call()
    except ClientError as error:
        if error.response.get("Error", {}).get("Code") in absent:
            return None
        raise


def _plan_s3_versioning(s3: Any, plan: Plan, exists: bool, options: InitOptions) -> None:
    status = s3.get_bucket_versioning(Bucket=plan.bucket).get("Status") if exists else None
    if status == "Enabled":
        plan.keep("versioning", "already on")
        return
    if exists and not options.enable_versioning:
        raise _versioning_off(plan.bucket)
    plan.change(
        "versioning",
        "turn on",
        lambda: s3.put_bucket_versioning(Bucket=plan.bucket, VersioningConfiguration={"Status": "Enabled"}),
    )


def _plan_s3_lifecycle(s3: Any, plan: Plan, exists: bool, noncurrent_days: int) -> None:
    found = (
        _s3_read(lambda: s3.get_bucket_lifecycle_configuration(Bucket=plan.bucket), "NoSuchLifecycleConfiguration")
        if exists
        else None
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
    found = (
        _s3_read(lambda: s3.get_public_access_block(Bucket=plan.bucket), "NoSuchPublicAccessBlockConfiguration")
        if exists
        else None
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
    found = (
        _s3_read(lambda: s3.get_bucket_encryption(Bucket=plan.bucket), "ServerSideEncryptionConfigurationNotFoundError")
        if exists
        else None
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
    found = _s3_read(lambda: s3.get_bucket_policy(Bucket=plan.bucket), "NoSuchBucketPolicy") if exists else None
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
        if error.response.get("Error", {}).get("Code") not in ("404", "NoSuchBucket", "NotFound"):
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
        if error.response.get("Error", {}).get("Code") == "BucketAlreadyExists":
            raise MemoryStoreError("forbidden", f"The bucket name {bucket} is taken by another account.") from None
        if error.response.get("Error", {}).get("Code") != "BucketAlreadyOwnedByYou":
            raise


def gcs_lifecycle(noncurrent_days: int) -> list[dict[str, Any]]:
    return [
        {"action": {"type": "Delete"}, "condition": {"daysSinceNoncurrentTime": noncurrent_days, "isLive": False}},
        {"action": {"type": "AbortIncompleteMultipartUpload"}, "condition": {"age": ABORT_MULTIPART_DAYS}},
    ]


def _init_gcs(bucket: str, options: InitOptions, dry_run: bool) -> Plan:
    from google.api_core import exceptions as api
    from google.auth.exceptions import DefaultCredentialsError, RefreshError
    from google.cloud import storage

    try:
        client = storage.Client(project=options.project or os.environ.get("GOOGLE_CLOUD_PROJECT"))
    except DefaultCredentialsError as error:
        raise no_google_credentials(f"gs://{bucket}", error) from None
    plan = Plan(bucket)
    try:
        try:
            existing = client.get_bucket(bucket)
        except api.NotFound:
            existing = None
        target = existing or client.bucket(bucket)
        if existing is not None and not existing.versioning_enabled and not options.enable_versioning:
            raise _versioning_off(bucket)
        _plan_gcs(plan, target, existing is not None, options)
        if not dry_run and plan.changes:
            for step in plan.changes:
                assert step.apply is not None
                step.apply()
            if existing is None:
                client.create_bucket(target, project=options.project, location=options.location)
            else:
                target.patch()
            plan.applied = True
        elif not dry_run:
            plan.applied = True
    except RefreshError as error:
        raise no_google_credentials(f"gs://{bucket}", error) from None
    except (api.Forbidden, api.Unauthorized) as error:
        raise MemoryStoreError("forbidden", f"Setting up gs://{bucket} was denied: {error.message}.") from None
    except api.GoogleAPICallError as error:
        raise MemoryStoreError("unavailable", f"Setting up gs://{bucket} failed: {error.message}.") from None
    finally:
        client.close()
    return plan


def _plan_gcs(plan: Plan, target: Any, exists: bool, options: InitOptions) -> None:
    """The steps on a bucket object; each sets a field, and one patch (or the create) sends them all."""
    if exists:
        plan.keep("bucket", "exists")
    else:
        where = f" in {options.location}" if options.location else ""
        plan.change("bucket", f"create{where}", lambda: None)
    if exists and target.versioning_enabled:
        plan.keep("versioning", "already on")
    else:
        plan.change("versioning", "turn on", lambda: setattr(target, "versioning_enabled", True))
    rules = [dict(rule) for rule in target.lifecycle_rules] if exists else []
    missing = [rule for rule in gcs_lifecycle(options.noncurrent_days) if rule not in rules]
    if missing:
        plan.change(
            "lifecycle",
            f"add {len(missing)} rules (noncurrent versions {options.noncurrent_days} days) "
            f"beside {len(rules)} existing",
            lambda: setattr(target, "lifecycle_rules", [*rules, *missing]),
        )
    else:
        plan.keep("lifecycle", "rules in place")
    access = target.iam_configuration
    if not exists:
        plan.change("access", "uniform bucket-level access, public access prevented", lambda: _lock_down(access))
    elif access.uniform_bucket_level_access_enabled and access.public_access_prevention == "enforced":
        plan.keep("access", "uniform, public access prevented")
    else:
        plan.keep(
            "access",
            "left as it is: turning on uniform access or public access prevention would withdraw the bucket's "
            "existing ACL or public grants; change them yourself if you mean to",
        )
    if not exists:
        plan.change("soft delete", "off: versioning already keeps deleted objects", lambda: _no_soft_delete(target))
    else:
        plan.keep("soft delete", "left as it is (it bills deleted objects on top of their noncurrent versions)")
    if options.kms_key is None:
        plan.keep("encryption", f"keep {target.default_kms_key_name or 'Google-managed keys'}")
    elif target.default_kms_key_name == options.kms_key:
        plan.keep("encryption", f"keep {options.kms_key}")
    elif exists and target.default_kms_key_name:
        raise MemoryStoreError(
            "unavailable",
            f"The bucket {plan.bucket} encrypts with {target.default_kms_key_name} by default, not "
            f"{options.kms_key}; init does not replace a bucket's key. Nothing was changed.",
        )
    else:
        key = options.kms_key
        plan.change(
            "encryption", f"encrypt with {key} by default", lambda: setattr(target, "default_kms_key_name", key)
        )


def _no_soft_delete(target: Any) -> None:
    target.soft_delete_policy.retention_duration_seconds = 0


def _lock_down(access: Any) -> None:
    access.uniform_bucket_level_access_enabled = True
    access.public_access_prevention = "enforced"


class VersioningOff(MemoryStoreError):
    """An existing bucket keeps no versions and init was not asked to turn them on: the caller's
    choice to make (--enable-versioning, or another bucket), not a failure of the cloud."""


def _versioning_off(bucket: str) -> MemoryStoreError:
    return VersioningOff(
        "unavailable",
        f"The bucket {bucket} exists with object versioning off, so `recover` could not bring back deleted "
        "memories. Run init again with --enable-versioning to turn it on (old versions are then kept for "
        f"{NONCURRENT_VERSION_DAYS} days and billed as storage), or choose another bucket.",
    )
