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

from bucket_memory.objects.urls import parse_url
from bucket_memory.policy import (
    BUCKET_PATTERNS,
    MAX_PREFIX_CHARS,
    PREFIX_PATTERN,
    REFUSED_SEGMENTS,
    access_policy,
    gcs_condition,
    memory_prefixes,
    operator_policy,
)

from .helpers import cli
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
