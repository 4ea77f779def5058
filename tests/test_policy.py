"""`bucket-memory policy` against hostile buckets and prefixes, on S3 and GCS: refused with the
character or rule that is wrong, never a document that grants more than the memory; the rules are
the Terraform modules' own, read out of their variables.tf."""

from __future__ import annotations

import json
import re
import string
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from a13n_harness.providers.memory import MemoryStoreError

from bucket_memory.format.wire_values import checkpoint_key, erasure_record_key, intent_key, log_key, run_key
from bucket_memory.objects.urls import parse_url
from bucket_memory.policy import (
    BUCKET_PATTERNS,
    MAX_PREFIX_CHARS,
    PREFIX_PATTERN,
    REFUSED_SEGMENTS,
    access_policy,
    gcs_condition,
    gcs_write_condition,
    memory_prefixes,
    operator_policy,
)

from .helpers import cli, iam_enforced_moto
from .test_terraform import GOOD_PREFIXES, HOSTILE_PREFIXES

MODULES = Path(__file__).parent.parent / "terraform" / "modules"
ALLOWED = set(string.ascii_letters + string.digits + "_.=-/")
# Every builder of a document, as (cloud, build(bucket, prefixes)).
BUILDERS: list[tuple[str, Callable[[str, list[str]], Any]]] = [
    ("s3", access_policy),
    ("s3", operator_policy),
    ("gs", gcs_condition),
]
CLAUSE = re.compile(r'resource\.name\.startsWith\("(projects/_/buckets/[a-z0-9_.-]+/objects/[A-Za-z0-9_.=/-]+/)"\)')
BUCKET_CLAUSE = 'resource.type == "storage.googleapis.com/Bucket"'


def test_the_rules_are_the_terraform_modules() -> None:
    for module, scheme in (("s3-memory-bucket", "s3"), ("gcs-memory-bucket", "gs")):
        source = (MODULES / module / "variables.tf").read_text()
        (prefix_pattern,) = re.findall(r'can\(regex\(("(?:[^"\\]|\\.)*"), prefix\)\)', source)
        assert json.loads(prefix_pattern) == PREFIX_PATTERN, module
        (segments,) = re.findall(r"!contains\((\[.*?\]), segment\)", source)
        assert tuple(json.loads(segments)) == REFUSED_SEGMENTS, module
        (longest,) = re.findall(r'length\(trimsuffix\(prefix, "/"\)\) <= (\d+)', source)
        assert int(longest) == MAX_PREFIX_CHARS, module
        (bucket_pattern,) = re.findall(r'can\(regex\(("(?:[^"\\]|\\.)*"), var\.bucket_name\)\)', source)
        assert json.loads(bucket_pattern) == BUCKET_PATTERNS[scheme], module
    assert '!strcontains(var.bucket_name, "..")' in (MODULES / "s3-memory-bucket" / "variables.tf").read_text()
    assert '!startswith(var.bucket_name, "goog")' in (MODULES / "gcs-memory-bucket" / "variables.tf").read_text()


def _grants(url: str) -> list[str]:
    """Every string the document `policy URL` prints grants: S3 resources and s3:prefix values, or
    the prefixes of a GCS condition, which must be made of `startsWith` clauses only."""
    bucket, prefixes = memory_prefixes([parse_url(url)])
    if url.startswith("gs://"):
        condition = gcs_condition(bucket, prefixes)
        assert condition is not None
        return _condition_prefixes(condition)
    statements = operator_policy(bucket, prefixes)["Statement"]
    granted = []
    for statement in statements:
        resources = statement["Resource"]
        granted += resources if isinstance(resources, list) else [resources]
        granted += statement.get("Condition", {}).get("StringLike", {}).get("s3:prefix", [])
    return granted


def _condition_prefixes(condition: str) -> list[str]:
    """The object prefixes a condition admits; it must be startsWith clauses and the bucket's, only."""
    *clauses, last = condition.split(" || ")
    assert last == BUCKET_CLAUSE, condition
    found = [CLAUSE.fullmatch(clause) for clause in clauses]
    assert all(found), condition
    return [match[1] for match in found if match]


def _iam_matches(pattern: str, value: str) -> bool:
    """How IAM reads a resource or StringLike value: * is any run of characters, ? any one."""
    return (
        re.fullmatch("".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern), value)
        is not None
    )


@pytest.mark.parametrize(("prefix", "_"), HOSTILE_PREFIXES, ids=[ascii(prefix)[:40] for prefix, _ in HOSTILE_PREFIXES])
@pytest.mark.parametrize(("scheme", "build"), BUILDERS, ids=["s3-agents", "s3-operators", "gcs"])
def test_each_document_refuses_a_hostile_prefix(
    scheme: str, build: Callable[[str, list[str]], Any], prefix: str, _: str
) -> None:
    with pytest.raises(MemoryStoreError) as refused:
        build("acme", [f"{prefix}/", "teams/blue/"])
    message = str(refused.value)
    assert refused.value.code == "invalid_path" and f"{scheme}://acme/" in message, message
    if wrong := next((character for character in prefix if character not in ALLOWED), None):
        assert f"{wrong!a} (U+{ord(wrong):04X}) cannot be in a prefix" in message, message
        assert "ASCII letters, digits and _ . = - joined by /" in message, "and says what is allowed"
    assert message.isascii() and message.isprintable(), "what was given is shown escaped"


@pytest.mark.parametrize("prefix", [prefix for prefix, _ in HOSTILE_PREFIXES if prefix.strip("/") == prefix])
@pytest.mark.parametrize("scheme", ["s3", "gs"])
def test_policy_refuses_a_hostile_prefix(scheme: str, prefix: str) -> None:
    printed = cli("policy", f"{scheme}://acme/{quote(prefix)}", expect=2)  # the command line was wrong
    assert "Invalid value" in printed and "Statement" not in printed and "condition" not in printed, printed


@pytest.mark.parametrize(
    "url",
    [
        'gs://a")||true||("b/x',
        "gs://goog-memory/x",
        "gs://Acme/x",
        "s3://a..b/x",
        "s3://ab/x",
        "s3://acme_b/x",
        "s3://user@acme/x",
        "s3://acme:9/x",
        f"s3://{'a' * 64}/x",
    ],
)
def test_policy_refuses_a_hostile_bucket(url: str) -> None:
    printed = cli("policy", url, expect=2)
    assert "not a bucket an IAM grant can name" in printed and "Statement" not in printed, printed


@pytest.mark.parametrize("prefix", GOOD_PREFIXES)
@pytest.mark.parametrize("scheme", ["s3", "gs"])
def test_an_allowed_prefix_grants_only_its_memory(scheme: str, prefix: str) -> None:
    """The grant of `x` covers `x/...` and never `xy/...` nor `x` itself: the prefix ends in /."""
    stem = prefix.strip("/")
    if not stem:  # the whole bucket: S3 grants acme/*, GCS binds without a condition
        assert gcs_condition("acme", [""]) is None
        assert access_policy("acme", [""])["Statement"][0]["Resource"] == ["arn:aws:s3:::acme/*"]
        return
    grants = _grants(f"{scheme}://acme/{prefix}")
    objects = "arn:aws:s3:::acme/" if scheme == "s3" else "projects/_/buckets/acme/objects/"
    key = "log/00000000000000000001.json"

    def granted(name: str) -> bool:
        if scheme == "gs":
            return any(f"{objects}{name}".startswith(grant) for grant in grants)
        return any(_iam_matches(grant, f"{objects}{name}") or _iam_matches(grant, name) for grant in grants)

    assert granted(f"{stem}/{key}")
    assert not granted(f"{stem}y/{key}") and not granted(f"{stem}.other/{key}") and not granted(stem)
    assert not granted(f"other/{stem}/{key}")


def test_the_gcs_condition_admits_every_prefix_and_no_more() -> None:
    prefixes = list(dict.fromkeys(f"{prefix.strip('/')}/" for prefix in GOOD_PREFIXES if prefix.strip("/")))
    condition = gcs_condition("acme", prefixes)
    assert condition is not None
    assert _condition_prefixes(condition) == [f"projects/_/buckets/acme/objects/{prefix}" for prefix in prefixes]


# The keys a memory writes, relative to its prefix (`MEMORY_KEYS`), and the records only operators write.
MEMORY_KEYS = [
    log_key(7),
    run_key(7),
    checkpoint_key(7),
    intent_key(1_700_000_000_000, 7, "0" * 32),
    "doctor/0123456789abcdef.json",
]
RECORD = erasure_record_key(7, "0" * 64)
# Memories under the granted `teams/` and `teams/blue/`: those two, one nested under a grant but not
# granted itself, and one whose last segment ends in "erasures" (a pattern like teams/*erasures/*
# would refuse its log).
MEMORIES = ["teams/", "teams/blue/", "teams/green/x/", "teams/old-erasures/"]
GRANTED = ["teams/", "teams/blue/"]


def _s3_allows(policy: dict[str, Any], action: str, key: str) -> bool:
    """Whether IAM lets a holder of `policy` alone do `action` on `key` of bucket acme: an explicit Deny
    that matches outweighs every Allow."""
    resource = f"arn:aws:s3:::acme/{key}"
    matching = [
        statement
        for statement in policy["Statement"]
        if action in _listed(statement["Action"])
        and any(_iam_matches(pattern, resource) for pattern in _listed(statement["Resource"]))
    ]
    return any(s["Effect"] == "Allow" for s in matching) and not any(s["Effect"] == "Deny" for s in matching)


def _listed(value: str | list[str]) -> list[str]:
    return value if isinstance(value, list) else [value]


def test_only_operators_create_or_delete_an_erasure_record_on_s3() -> None:
    agent, operator = access_policy("acme", GRANTED), operator_policy("acme", GRANTED)
    for memory in MEMORIES:
        for key in [*MEMORY_KEYS, RECORD]:
            for action in ("s3:GetObject", "s3:PutObject", "s3:DeleteObject"):
                assert _s3_allows(operator, action, memory + key), (action, memory + key)
                allowed = key != RECORD or action == "s3:GetObject"
                assert _s3_allows(agent, action, memory + key) == allowed, (action, memory + key)
    assert not _s3_allows(agent, "s3:PutObject", f"other/{RECORD}"), "nor anything outside the prefixes"
    # The whole bucket: every memory's records, none of its keys.
    whole = access_policy("acme", [""])
    assert not _s3_allows(whole, "s3:PutObject", RECORD) and not _s3_allows(whole, "s3:DeleteObject", f"a/b/{RECORD}")
    assert all(_s3_allows(whole, "s3:PutObject", f"a/{key}") for key in MEMORY_KEYS)


def _cel_admits(condition: str, name: str) -> bool:
    """How IAM reads a condition made of `resource.name.startsWith("...")`, `resource.type == "..."`,
    `!`, `&&`, `||` and parentheses, for the object `name` of bucket acme."""
    python = re.sub(r'resource\.name\.startsWith\(("[^"]*")\)', r"name.startswith(\1)", condition)
    python = python.replace("resource.type ==", "kind ==").replace("&&", " and ").replace("||", " or ")
    python = python.replace("!", " not ")
    assert re.fullmatch(r'([ ()]|name\.startswith\("[^"]*"\)|kind == "[^"]*"|and|or|not)*', python), condition
    scope = {"name": f"projects/_/buckets/acme/objects/{name}", "kind": "storage.googleapis.com/Object"}
    return bool(eval(python, {"__builtins__": {}}, scope))  # checked above to be only these words


def test_agents_on_gcs_write_under_their_prefixes_but_no_erasure_record() -> None:
    """The agents' objectUser binding; their objectViewer binding and the operators' objectUser one
    admit every object under the prefixes (test_the_gcs_condition_admits_every_prefix_and_no_more)."""
    writes = gcs_write_condition("acme", GRANTED)
    read = gcs_condition("acme", GRANTED)
    assert read is not None
    for memory in MEMORIES:
        for key in MEMORY_KEYS:
            assert _cel_admits(writes, memory + key) and _cel_admits(read, memory + key), memory + key
        assert _cel_admits(read, memory + RECORD), "agents read every record"
        # Named in the grant, a memory's records are refused; nested under one and not named, they
        # are not (IAM conditions compare only a name's start and end: docs/decisions/019-trust-model.md says so).
        assert _cel_admits(writes, memory + RECORD) == (memory not in GRANTED), memory
    assert not _cel_admits(writes, f"other/{MEMORY_KEYS[0]}")
    whole = gcs_write_condition("acme", [""])
    assert _cel_admits(whole, f"a/{MEMORY_KEYS[0]}") and not _cel_admits(whole, RECORD)


def test_moto_enforcing_iam_refuses_the_agents_an_erasure_record_and_admits_the_operators() -> None:
    """moto evaluates a user's policies as IAM does for these documents: `*` spans `/`, an explicit
    Deny outweighs any Allow (it ignores conditions, which these object statements have none of)."""
    import botocore.exceptions
    import botocore.session

    with iam_enforced_moto(
        "acme",
        {"agent": json.dumps(access_policy("acme", GRANTED)), "operator": json.dumps(operator_policy("acme", GRANTED))},
    ) as act_as:

        def s3() -> Any:
            return botocore.session.get_session().create_client("s3")

        def refused(call: Callable[[], object]) -> bool:
            with pytest.raises(botocore.exceptions.ClientError) as caught:
                call()
            return bool(caught.value.response["Error"]["Code"] == "AccessDenied")

        act_as("operator")
        for memory in ("teams/", "teams/green/x/"):
            s3().put_object(Bucket="acme", Key=memory + RECORD, Body=b"{}")
        act_as("agent")
        agent = s3()
        for memory in ("teams/", "teams/green/x/"):
            assert agent.get_object(Bucket="acme", Key=memory + RECORD)["Body"].read() == b"{}"
            assert refused(lambda: agent.put_object(Bucket="acme", Key=memory + RECORD, Body=b"forged"))  # noqa: B023
            assert refused(lambda: agent.delete_object(Bucket="acme", Key=memory + RECORD))  # noqa: B023
            assert refused(lambda: agent.put_object(Bucket="acme", Key=f"{memory}erasures/x", Body=b"x"))  # noqa: B023
        for memory in MEMORIES:
            agent.put_object(Bucket="acme", Key=memory + log_key(1), Body=b"{}")
            agent.delete_object(Bucket="acme", Key=memory + log_key(1))
        assert refused(lambda: agent.put_object(Bucket="acme", Key="other/" + log_key(1), Body=b"{}"))
        act_as("operator")
        operator = s3()
        operator.put_object(Bucket="acme", Key=f"teams/blue/{RECORD}", Body=b"{}")
        operator.delete_object(Bucket="acme", Key=f"teams/blue/{RECORD}")
        assert operator.get_object(Bucket="acme", Key=f"teams/{RECORD}")["Body"].read() == b"{}", "not forged"
