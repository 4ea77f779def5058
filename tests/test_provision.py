"""Terraform modules and `bucket-memory init`: static checks, equal settings, and the S3 policy applied in moto."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from a13n_harness.providers.memory import MemoryStoreError
from tools.terraform_docs import parsed

from bucket_memory.provision import ABORT_MULTIPART_DAYS, NONCURRENT_VERSION_DAYS

from .helpers import cli

TERRAFORM = Path(__file__).parent.parent / "terraform"
MODULES = TERRAFORM / "modules"
COMMAND = str(Path(sys.executable).with_name("bucket-memory"))


def resource(module: str, kind: str) -> dict[str, Any]:
    for block in parsed(MODULES / module / "main.tf")["resource"]:
        if kind in block:
            found: dict[str, Any] = next(iter(block[kind].values()))
            return found
    raise AssertionError(f"{module} declares no {kind}")


def default(module: str, variable: str) -> Any:
    for block in parsed(MODULES / module / "variables.tf")["variable"]:
        if variable in block:
            return block[variable]["default"]
    raise AssertionError(f"{module} declares no variable {variable}")


def test_every_terraform_file_parses() -> None:
    files = sorted(TERRAFORM.rglob("*.tf"))
    assert len(files) >= 10
    for file in files:
        assert parsed(file), file


def test_the_modules_keep_what_init_keeps() -> None:
    assert default("s3-memory-bucket", "noncurrent_version_days") == NONCURRENT_VERSION_DAYS
    assert default("gcs-memory-bucket", "noncurrent_version_days") == NONCURRENT_VERSION_DAYS
    assert (
        resource("s3-memory-bucket", "aws_s3_bucket_versioning")["versioning_configuration"][0]["status"] == "Enabled"
    )
    rule = resource("s3-memory-bucket", "aws_s3_bucket_lifecycle_configuration")["rule"][0]
    assert rule["noncurrent_version_expiration"][0]["noncurrent_days"] == "${var.noncurrent_version_days}"
    assert rule["abort_incomplete_multipart_upload"][0]["days_after_initiation"] == ABORT_MULTIPART_DAYS
    assert rule["expiration"][0]["expired_object_delete_marker"] is True
    bucket = resource("gcs-memory-bucket", "google_storage_bucket")
    assert bucket["versioning"][0]["enabled"] is True
    noncurrent, multipart = bucket["lifecycle_rule"]
    assert noncurrent["condition"][0]["days_since_noncurrent_time"] == "${var.noncurrent_version_days}"
    assert multipart["condition"][0]["age"] == ABORT_MULTIPART_DAYS
    assert bucket["public_access_prevention"] == "enforced" and bucket["uniform_bucket_level_access"] is True


run = cli


def test_init_s3(s3_endpoint: str) -> None:
    import botocore.session

    s3 = botocore.session.get_session().create_client("s3")
    made = run("init", "s3://init-fresh/team")
    assert "+ bucket" in made and "create in us-east-1" in made and "refuses duplicate creates" in made
    assert s3.get_bucket_versioning(Bucket="init-fresh")["Status"] == "Enabled"
    (rule,) = s3.get_bucket_lifecycle_configuration(Bucket="init-fresh")["Rules"]
    assert rule["NoncurrentVersionExpiration"]["NoncurrentDays"] == NONCURRENT_VERSION_DAYS
    assert rule["AbortIncompleteMultipartUpload"]["DaysAfterInitiation"] == ABORT_MULTIPART_DAYS
    assert rule["Expiration"] == {"ExpiredObjectDeleteMarker": True}
    assert all(s3.get_public_access_block(Bucket="init-fresh")["PublicAccessBlockConfiguration"].values())
    assert "is http://" in made, "the TLS-only statement is skipped against a local endpoint"
    assert "nothing to change" in run("init", "s3://init-fresh/team")
    s3.create_bucket(Bucket="init-unversioned")
    refusal = run("init", "s3://init-unversioned", expect=2)
    assert "--enable-versioning" in refusal and "init-unversioned" in refusal
    assert "Status" not in s3.get_bucket_versioning(Bucket="init-unversioned")
    assert "+ versioning     turn on" in run("init", "s3://init-unversioned", "--enable-versioning")
    assert s3.get_bucket_versioning(Bucket="init-unversioned")["Status"] == "Enabled"


def test_init_keeps_what_an_existing_bucket_has(s3_endpoint: str) -> None:
    """KMS default encryption, a lifecycle rule and a policy statement of the owner's all stay."""
    import botocore.session

    s3 = botocore.session.get_session().create_client("s3")
    bucket = "init-owned"
    s3.create_bucket(Bucket=bucket)
    s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
    kms = {"SSEAlgorithm": "aws:kms", "KMSMasterKeyID": "arn:aws:kms:us-east-1:123456789012:key/owner"}
    s3.put_bucket_encryption(
        Bucket=bucket, ServerSideEncryptionConfiguration={"Rules": [{"ApplyServerSideEncryptionByDefault": kms}]}
    )
    owners_rule = {"ID": "owners-logs", "Status": "Enabled", "Filter": {"Prefix": "logs/"}, "Expiration": {"Days": 9}}
    s3.put_bucket_lifecycle_configuration(Bucket=bucket, LifecycleConfiguration={"Rules": [owners_rule]})
    owners_statement = {
        "Sid": "OwnersReader",
        "Effect": "Allow",
        "Principal": {"AWS": "arn:aws:iam::123456789012:root"},
        "Action": "s3:GetObject",
        "Resource": f"arn:aws:s3:::{bucket}/*",
    }
    s3.put_bucket_policy(Bucket=bucket, Policy=json.dumps({"Version": "2012-10-17", "Statement": [owners_statement]}))

    def settings() -> tuple[Any, ...]:
        return (
            s3.get_bucket_encryption(Bucket=bucket)["ServerSideEncryptionConfiguration"]["Rules"],
            sorted(rule["ID"] for rule in s3.get_bucket_lifecycle_configuration(Bucket=bucket)["Rules"]),
            sorted(item["Sid"] for item in json.loads(s3.get_bucket_policy(Bucket=bucket)["Policy"])["Statement"]),
        )

    before = settings()
    planned = run("init", f"s3://{bucket}", "--tls-only", "--dry-run")
    assert "keep aws:kms with arn:aws:kms" in planned and "beside 1 existing" in planned
    assert "dry run: 3 changes planned" in planned and settings() == before
    # moto enforces the TLS-only statement: over its http endpoint, init's own create-only check is refused.
    applied = run("init", f"s3://{bucket}", "--tls-only", expect=3)
    assert "is http://: with DenyInsecureTransport the bucket refuses every request" in applied
    encryption, rules, statements = settings()
    assert encryption == before[0]
    assert rules == ["expire-noncurrent-versions", "owners-logs"]
    assert statements == ["DenyInsecureTransport", "OwnersReader"]
    assert "= policy         statement DenyInsecureTransport in place" in run(
        "init", f"s3://{bucket}", "--tls-only", "--dry-run"
    )

    # A statement of init's name that says something else is not init's to replace.
    clash = {**owners_statement, "Sid": "DenyInsecureTransport"}
    s3.put_bucket_policy(Bucket=bucket, Policy=json.dumps({"Version": "2012-10-17", "Statement": [clash]}))
    refusal = run("init", f"s3://{bucket}", "--tls-only", expect=3)
    assert "DenyInsecureTransport" in refusal and "nothing was changed" in refusal
    assert json.loads(s3.get_bucket_policy(Bucket=bucket)["Policy"])["Statement"] == [clash]


def test_init_gcs(gcs_endpoint: str) -> None:
    from google.cloud import storage

    assert "+ bucket" in run("init", "gs://init-fresh", "--project", "test", "--location", "EU")
    client = storage.Client()
    bucket = client.get_bucket("init-fresh")
    assert bucket.versioning_enabled
    client.create_bucket("init-unversioned")
    assert "--enable-versioning" in run("init", "gs://init-unversioned", expect=2)
    run("init", "gs://init-unversioned", "--enable-versioning")
    assert client.get_bucket("init-unversioned").versioning_enabled
    client.close()


def test_init_gcs_keeps_what_an_existing_bucket_has() -> None:
    """fake-gcs-server keeps neither lifecycle rules, IAM settings nor a KMS key, so the plan is
    checked on the client's bucket object, which is what init patches."""
    from google.cloud import storage

    from bucket_memory.provision import InitOptions, Plan
    from bucket_memory.provision_gcs import _plan_gcs, gcs_lifecycle

    owners_rule = {"action": {"type": "Delete"}, "condition": {"age": 9, "matchesPrefix": ["logs/"]}}
    bucket = storage.Bucket(storage.Client.create_anonymous_client(), "owned")
    bucket.versioning_enabled = True
    bucket.lifecycle_rules = [owners_rule]
    plan = Plan("owned")
    _plan_gcs(plan, bucket, True, InitOptions(kms_key="projects/p/locations/eu/keyRings/r/cryptoKeys/k"))
    for step in plan.changes:
        assert step.apply is not None
        step.apply()
    assert list(bucket.lifecycle_rules) == [owners_rule, *gcs_lifecycle(NONCURRENT_VERSION_DAYS)]
    assert bucket.default_kms_key_name == "projects/p/locations/eu/keyRings/r/cryptoKeys/k"
    assert not bucket.iam_configuration.uniform_bucket_level_access_enabled, "existing ACLs are the owner's"
    again = Plan("owned")
    _plan_gcs(again, bucket, True, InitOptions())
    assert not again.changes
    with pytest.raises(MemoryStoreError) as caught:
        _plan_gcs(
            Plan("owned"), bucket, True, InitOptions(kms_key="projects/p/locations/eu/keyRings/r/cryptoKeys/other")
        )
    assert "does not replace a bucket's key" in str(caught.value)
    fresh = storage.Bucket(storage.Client.create_anonymous_client(), "fresh")
    created = Plan("fresh")
    _plan_gcs(created, fresh, False, InitOptions())
    for step in created.changes:
        assert step.apply is not None
        step.apply()
    assert fresh.soft_delete_policy.retention_duration_seconds == 0, "a new bucket has soft delete off"


def test_policy_prints_the_grants_for_one_bucket() -> None:
    agent = json.loads(run("policy", "s3://acme/teams/blue", "s3://acme/teams/blue/", "s3://acme/ops"))
    (objects, listing, erasures) = agent["Statement"]
    assert objects["Resource"] == ["arn:aws:s3:::acme/teams/blue/*", "arn:aws:s3:::acme/ops/*"]
    assert erasures["Effect"] == "Deny" and erasures["Resource"] == [
        "arn:aws:s3:::acme/teams/blue/erasures/*",
        "arn:aws:s3:::acme/teams/blue/*/erasures/*",
        "arn:aws:s3:::acme/ops/erasures/*",
        "arn:aws:s3:::acme/ops/*/erasures/*",
    ]
    assert listing["Condition"]["StringLike"]["s3:prefix"] == ["teams/blue/*", "ops/*"]
    assert not any("Version" in str(statement["Action"]) for statement in agent["Statement"])
    operator = json.loads(run("policy", "--operator", "s3://acme"))
    assert all(statement["Effect"] == "Allow" for statement in operator["Statement"]), "operators write records"
    granted = {s["Action"] for s in operator["Statement"][2:]}
    assert {"s3:ListBucketVersions", "s3:GetObjectVersion", "s3:DeleteObjectVersion"} <= granted
    erase = next(s for s in operator["Statement"] if s["Action"] == "s3:DeleteObjectVersion")
    assert erase["Resource"] == ["arn:aws:s3:::acme/*"], "erase deletes old versions under the prefixes only"
    assert operator["Statement"][0]["Resource"] == ["arn:aws:s3:::acme/*"], "a bucket URL grants the whole bucket"
    keyed = json.loads(run("policy", "s3://acme/t", "--kms-key", "arn:aws:kms:eu-west-1:123456789012:key/k-1"))
    (key,) = [statement for statement in keyed["Statement"] if statement["Sid"] == "MemoryEncryptionKey"]
    assert key["Condition"]["StringEquals"]["kms:ViaService"] == "s3.eu-west-1.amazonaws.com"


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["s3://acme/te*ms"], "'*' (U+002A) cannot be in a prefix IAM grants"),
        (["s3://acme/a%3Fb"], "'?' (U+003F) cannot be in a prefix IAM grants"),
        (["s3://acme/${aws:username}"], "'$' (U+0024) cannot be in a prefix IAM grants"),
        (["s3://acme/a", "s3://other/b"], "one bucket"),
        (["s3://acme/a", "gs://acme/b"], "one bucket"),
        (["s3://acme/a", "--kms-key", "arn:aws:kms:eu-west-1:123456789012:alias/k"], "not a KMS key ARN"),
        (["s3://acme/team/log"], "reserved"),
    ],
)
def test_policy_refuses_what_would_grant_too_much(arguments: list[str], message: str) -> None:
    assert message in run("policy", *arguments, expect=2)


def test_policy_on_gcs_prints_the_modules_condition() -> None:
    printed = run("policy", "gs://acme/teams/blue")
    condition = 'resource.name.startsWith("projects/_/buckets/acme/objects/teams/blue/")'
    assert condition in printed and 'resource.type == "storage.googleapis.com/Bucket"' in printed
    module = (MODULES / "gcs-memory-bucket" / "main.tf").read_text()
    assert 'resource.name.startsWith(\\"${local.objects}${prefix}\\")' in module
    assert 'resource.type == \\"storage.googleapis.com/Bucket\\"' in module
    assert "the whole bucket" in run("policy", "gs://acme")
    assert "a local memory has no IAM" in run("policy", "/tmp/memory", expect=2)


def test_missing_aws_credentials_are_forbidden_with_one_message_everywhere(
    s3_endpoint: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """`init` said `unavailable` where `ls` and the guide say `forbidden`."""
    for variable in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    said = [cli(*command, expect=3) for command in (["init", "s3://no-keys-here/x"], ["ls", "s3://no-keys-here/x"])]
    for output in said:
        assert "forbidden" in output and "No AWS credentials to reach s3://no-keys-here" in output, output
