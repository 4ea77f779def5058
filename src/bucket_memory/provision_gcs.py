"""`bucket-memory init` on GCS: the bucket's fields set one by one beside what it has, then sent in
one patch or create (`provision.init_bucket` chooses the cloud)."""

from __future__ import annotations

import os
from typing import Any

from a13n_harness.providers.memory import MemoryStoreError

from .objects.credentials import no_google_credentials
from .provision import ABORT_MULTIPART_DAYS, InitOptions, Plan, versioning_off


def gcs_lifecycle(noncurrent_days: int) -> list[dict[str, Any]]:
    return [
        {"action": {"type": "Delete"}, "condition": {"daysSinceNoncurrentTime": noncurrent_days, "isLive": False}},
        {"action": {"type": "AbortIncompleteMultipartUpload"}, "condition": {"age": ABORT_MULTIPART_DAYS}},
    ]


def init_gcs(bucket: str, options: InitOptions, dry_run: bool) -> Plan:
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
            raise versioning_off(bucket)
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
