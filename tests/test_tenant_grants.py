"""Tenant-scoped grants (`policy --tenant-tag NAME`): one role for every tenant, each session reaching
only `<prefix>/<its tag>`. moto evaluates no policy variable and no StringLike or Null condition,
and offers no IAM policy simulator: the document is held here to IAM's documented evaluation (an
evaluator of its own below), and moto enforcing IAM holds the refusal with each tenant's document as
IAM reads it for that tenant's sessions (the variable replaced by the tag's value)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import pytest
from a13n_harness.providers.memory import MemoryStoreError

from bucket_memory.format.tombstone import PROOF_KEY
from bucket_memory.format.wire_values import erasure_record_key, intent_key, log_key
from bucket_memory.policy import HOSTILE_TENANTS, access_policy, operator_policy

from .helpers import cli, point_at_moto
from .test_terraform import HOSTILE_TENANT_TAGS

TAG = "tenant"
KEYS = [log_key(3), "checkpoints/00000000000000000003.json", intent_key(1, 3, "0" * 32)]
OPERATORS_ONLY = [erasure_record_key(3, "0" * 64), PROOF_KEY]
_VARIABLE = re.compile(r"\$\{([^}]*)\}")


def _like(pattern: str, value: str) -> bool:
    """IAM's StringLike and resource matching: * any run of characters, ? any one."""
    return (
        re.fullmatch("".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern), value)
        is not None
    )


def _resolved(text: str, context: Mapping[str, str]) -> str | None:
    """`text` with each policy variable replaced from the request's context; None when one is missing
    (IAM then matches nothing with it)."""
    missing = [name for name in _VARIABLE.findall(text) if name not in context]
    return None if missing else _VARIABLE.sub(lambda found: context[found[1]], text)


def _listed(value: str | list[str]) -> list[str]:
    return value if isinstance(value, list) else [value]


def _conditions_hold(statement: dict[str, Any], context: Mapping[str, str]) -> bool:
    for operator, tests in statement.get("Condition", {}).items():
        for key, expected in tests.items():
            if operator == "Null":
                if (key not in context) != (expected == "true"):
                    return False
                continue
            assert operator == "StringLike", operator
            patterns = [
                resolved for pattern in _listed(expected) if (resolved := _resolved(pattern, context)) is not None
            ]
            if key not in context or not any(_like(pattern, context[key]) for pattern in patterns):
                return False
    return True


def iam_allows(policy: dict[str, Any], action: str, resource: str, context: Mapping[str, str]) -> bool:
    """Whether IAM lets a holder of `policy` alone do `action` on `resource` in `context` (the
    session's tags as `aws:PrincipalTag/K`, `s3:prefix` for a listing): an explicit Deny that
    matches outweighs every Allow."""

    def matches(statement: dict[str, Any]) -> bool:
        actions = _listed(statement["Action"])
        resources = [_resolved(pattern, context) for pattern in _listed(statement["Resource"])]
        return (
            any(_like(pattern, action) for pattern in actions)
            and any(pattern is not None and _like(pattern, resource) for pattern in resources)
            and _conditions_hold(statement, context)
        )

    matching = [statement for statement in policy["Statement"] if matches(statement)]
    return any(s["Effect"] == "Allow" for s in matching) and not any(s["Effect"] == "Deny" for s in matching)


def session(tag: str | None) -> dict[str, str]:
    return {} if tag is None else {f"aws:PrincipalTag/{TAG}": tag}


def may(policy: dict[str, Any], tag: str | None, action: str, key: str) -> bool:
    return iam_allows(policy, action, f"arn:aws:s3:::acme/{key}", session(tag))


def may_list(policy: dict[str, Any], tag: str | None, prefix: str) -> bool:
    return iam_allows(policy, "s3:ListBucket", "arn:aws:s3:::acme", {**session(tag), "s3:prefix": prefix})


@pytest.mark.parametrize("made", [access_policy, operator_policy])
def test_a_session_reaches_its_tenants_memory_and_no_other(made: Any) -> None:
    policy = made("acme", ["users/"], tenant_tag=TAG)
    for action in ("s3:GetObject", "s3:PutObject", "s3:DeleteObject"):
        for key in KEYS:
            assert may(policy, "alice", action, f"users/alice/{key}")
            assert may(policy, "alice", action, f"users/alice/drafts/{key}"), "a memory nested in her own"
            for other in ("users/bob/", "users/alicea/", "users/", "other/alice/", "alice/"):
                assert not may(policy, "alice", action, f"{other}{key}"), (action, other)
    assert may_list(policy, "alice", "users/alice/") and may_list(policy, "alice", f"users/alice/{log_key(3)}")
    assert not may_list(policy, "alice", "users/") and not may_list(policy, "alice", "users/bob/")


@pytest.mark.parametrize("made", [access_policy, operator_policy])
@pytest.mark.parametrize("tag", [None, *[tenant for tenant in HOSTILE_TENANTS if "*" not in tenant], "bob/x", "/bob"])
def test_a_session_whose_tag_names_no_one_segment_of_its_own_is_refused_everything(made: Any, tag: str | None) -> None:
    """Whoever tags sessions could otherwise name another tenant's nested memory (bob/x), or the
    folders of a memory at the prefix itself (log, erasures: its records, forged)."""
    policy = made("acme", ["users/"], tenant_tag=TAG)
    reached = f"users/{tag}/" if tag is not None else "users/"
    for key in [*KEYS, *OPERATORS_ONLY]:
        assert not may(policy, tag, "s3:PutObject", f"{reached}{key}"), (tag, key)
        assert not may(policy, tag, "s3:GetObject", f"{reached}{key}"), (tag, key)
    assert not may_list(policy, tag, reached)


def test_only_operators_write_their_tenants_erasure_records_and_destroy_proof() -> None:
    agents, operators = (made("acme", ["users/"], tenant_tag=TAG) for made in (access_policy, operator_policy))
    for key in OPERATORS_ONLY:
        for where in ("users/alice/", "users/alice/drafts/"):
            assert may(agents, "alice", "s3:GetObject", where + key)
            assert not may(agents, "alice", "s3:PutObject", where + key)
            assert not may(agents, "alice", "s3:DeleteObject", where + key)
            assert may(operators, "alice", "s3:PutObject", where + key)
        assert not may(operators, "alice", "s3:PutObject", f"users/bob/{key}")
    assert may(operators, "alice", "s3:DeleteObjectVersion", f"users/alice/{log_key(3)}")
    assert not may(operators, "alice", "s3:DeleteObjectVersion", f"users/bob/{log_key(3)}")


def test_without_a_tenant_tag_the_documents_are_unchanged() -> None:
    """The evaluator reads the fixed-prefix documents as before: a check of the checker."""
    policy = access_policy("acme", ["users/alice/"])
    assert may(policy, None, "s3:PutObject", f"users/alice/{log_key(1)}")
    assert not may(policy, None, "s3:PutObject", f"users/bob/{log_key(1)}")
    assert "${" not in json.dumps(policy)


@pytest.mark.parametrize("tag", HOSTILE_TENANT_TAGS)
def test_a_hostile_tag_name_is_refused(tag: str) -> None:
    for made in (access_policy, operator_policy):
        with pytest.raises(MemoryStoreError) as refused:
            made("acme", ["users/"], tenant_tag=tag)
        assert refused.value.code == "invalid_path" and "cannot be a tenant tag" in str(refused.value)
    printed = cli("policy", "s3://acme/users", "--tenant-tag", tag, expect=2)
    assert "cannot be a tenant tag" in printed and "Statement" not in printed


def test_gcs_has_no_tenant_tag_and_says_what_to_do() -> None:
    printed = " ".join(cli("policy", "gs://acme/users", "--tenant-tag", TAG, expect=2).split())
    assert "S3 only" in printed and "its own prefix" in printed and "condition" not in printed.split("Error")[0]


def as_read_for(policy: dict[str, Any], tag: str) -> dict[str, Any]:
    """The document as IAM reads it for sessions tagged `tag`: each variable replaced, and the
    Denies for a hostile tag left out (their conditions do not hold for `tag`, and moto, which
    evaluates no StringLike or Null condition, would apply them to every request)."""
    assert tag not in HOSTILE_TENANTS and "/" not in tag
    text = json.dumps([s for s in policy["Statement"] if not s["Sid"].startswith("TenantTag")])
    return {"Version": policy["Version"], "Statement": json.loads(text.replace(f"${{aws:PrincipalTag/{TAG}}}", tag))}


@contextmanager
def tagged_sessions(bucket: str, policies: Mapping[str, dict[str, Any]]) -> Iterator[Any]:
    """moto enforcing IAM once `bucket`, and a role per tenant holding its document, and a session of
    each (assumed with its tag, which moto keeps no record of) exist; yields `act_as(tenant)`."""
    import botocore.session

    from bucket_memory.testing.emulators import moto_server

    setup_actions = 1 + 3 * len(policies)  # the bucket, then a role, its policy and a session each
    with moto_server(enforce_iam_after=setup_actions) as endpoint, pytest.MonkeyPatch.context() as environment:
        point_at_moto(environment, endpoint)
        setup = botocore.session.get_session()
        setup.create_client("s3").create_bucket(Bucket=bucket)
        iam, sts = setup.create_client("iam"), setup.create_client("sts")
        trust = {
            "Version": "2012-10-17",
            "Statement": [{"Effect": "Allow", "Principal": {"AWS": "*"}, "Action": "sts:*"}],
        }
        sessions = {}
        for tenant, policy in policies.items():
            role = iam.create_role(RoleName=f"agents-{tenant}", AssumeRolePolicyDocument=json.dumps(trust))["Role"]
            iam.put_role_policy(RoleName=role["RoleName"], PolicyName="memory", PolicyDocument=json.dumps(policy))
            sessions[tenant] = sts.assume_role(
                RoleArn=role["Arn"], RoleSessionName=f"agent-{tenant}", Tags=[{"Key": TAG, "Value": tenant}]
            )["Credentials"]

        def act_as(tenant: str) -> None:
            environment.setenv("AWS_ACCESS_KEY_ID", sessions[tenant]["AccessKeyId"])
            environment.setenv("AWS_SECRET_ACCESS_KEY", sessions[tenant]["SecretAccessKey"])
            environment.setenv("AWS_SESSION_TOKEN", sessions[tenant]["SessionToken"])

        yield act_as


@pytest.mark.slow  # a moto server of its own, enforcing IAM (about 5 s); the evaluator above holds the document
def test_on_moto_enforcing_iam_a_session_of_tenant_a_is_refused_on_bs_memory() -> None:
    policy = access_policy("acme", ["users/"], tenant_tag=TAG)
    with tagged_sessions("acme", {tenant: as_read_for(policy, tenant) for tenant in ("a", "b")}) as act_as:
        act_as("a")
        cli("put", "s3://acme/users/a", "notes.md", given="A's\n")
        assert cli("cat", "s3://acme/users/a", "notes.md") == "A's\n"
        refused = cli("put", "s3://acme/users/b", "notes.md", given="sneak\n", expect=3)
        assert "denied" in refused.lower() or "forbidden" in refused.lower(), refused
        act_as("b")
        cli("put", "s3://acme/users/b", "notes.md", given="B's\n")
        assert cli("cat", "s3://acme/users/a", "notes.md", expect=3)
