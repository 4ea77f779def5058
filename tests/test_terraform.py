"""The Terraform modules and examples with the real `terraform`: init and validate each, the input
validation blocks, and the S3 module applied to moto, then the memory used through what it applied."""

from __future__ import annotations

import concurrent.futures
import json
import re
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from a13n_harness.providers.memory import MemoryStoreError, Origin

from bucket_memory import open_store
from bucket_memory.policy import access_policy, gcs_condition, gcs_write_condition, operator_policy
from bucket_memory.testing.emulators import moto_server

from .helpers import cli, point_at_moto
from .terraform import TERRAFORM_TREE, Terraform, provider_mirror

AWS_ROOTS = ["modules/s3-memory-bucket", "examples/lambda"]
GOOGLE_ROOTS = ["modules/gcs-memory-bucket", "examples/cloud-run"]
# moto authorizes nothing until this many actions have run: enough for terraform to apply, then
# the rest are spent by requests that carry no valid key (see `_spend_unchecked_actions`).
UNCHECKED_ACTIONS = 2000


@pytest.fixture(scope="module")
def terraform(tmp_path_factory: pytest.TempPathFactory) -> Terraform:
    return Terraform(tmp_path_factory.mktemp("terraform"))


def test_the_roots_are_every_root() -> None:
    roots = sorted(str(file.parent.relative_to(TERRAFORM_TREE)) for file in TERRAFORM_TREE.rglob("main.tf"))
    assert roots == sorted(AWS_ROOTS + GOOGLE_ROOTS)


@pytest.mark.parametrize("root", AWS_ROOTS + GOOGLE_ROOTS)
def test_each_readme_tables_every_input_and_output(root: str) -> None:
    from tools import terraform_docs

    directory = TERRAFORM_TREE / root
    readme = directory / "README.md"
    assert readme.read_text() == terraform_docs.rendered(readme), "run `python -m tools.terraform_docs`"
    for kind in ("variable", "output"):
        for name, block in terraform_docs.blocks(directory, kind).items():
            assert block.get("description"), f"{root}: {kind} {name} has no description"


@pytest.mark.parametrize("root", AWS_ROOTS)
def test_init_and_validate(terraform: Terraform, root: str) -> None:
    terraform(root, "init", "-backend=false")
    assert "The configuration is valid" in terraform(root, "validate")


def test_the_lambda_example_locks_the_provider_it_is_tested_with() -> None:
    """Issue 56: no lock file was committed, so a first `terraform init` took whatever 5.x was newest.
    The Lambda example (a root a reader inits) pins the version the mirror gives these tests; with
    no checksums, which the mirror has for one platform only, and those would fail every other's
    init. The modules (Terraform reads a lock only in the root) and the Cloud Run example (no
    google provider here: nothing tested to pin) have none, and its README says why."""
    lock = (TERRAFORM_TREE / "examples/lambda/.terraform.lock.hcl").read_text()
    (block,) = re.findall(r'provider "registry\.terraform\.io/hashicorp/aws" \{(.*?)\n\}', lock, flags=re.S)
    assert re.search(r'constraints = "~> 5\.30"', block) and "hashes" not in block, block
    version = re.search(r'version\s*=\s*"(5\.\d+\.\d+)"', block)
    assert version, block
    if (mirror := provider_mirror()) is not None:
        assert version[1] in {found.name for found in (mirror / "registry.terraform.io/hashicorp/aws").iterdir()}
    assert sorted(str(path.relative_to(TERRAFORM_TREE)) for path in TERRAFORM_TREE.rglob(".terraform.lock.hcl")) == [
        "examples/lambda/.terraform.lock.hcl"
    ]
    assert "No `.terraform.lock.hcl` is committed here" in (TERRAFORM_TREE / "examples/cloud-run/README.md").read_text()


def test_init_takes_the_locked_version(terraform: Terraform) -> None:
    """`terraform init` with the committed lock left as it is (`-lockfile=readonly`) installs it."""
    printed = terraform("examples/lambda", "init", "-backend=false", "-lockfile=readonly")
    lock = (TERRAFORM_TREE / "examples/lambda/.terraform.lock.hcl").read_text()
    locked = re.search(r'version\s*=\s*"([\d.]+)"', lock)
    assert locked, lock
    assert re.search(rf"(Installed|Using previously-installed) hashicorp/aws v{re.escape(locked[1])}", printed)


@pytest.mark.parametrize("root", GOOGLE_ROOTS)
def test_init_and_validate_google(terraform: Terraform, root: str) -> None:
    if provider_mirror("registry.terraform.io/hashicorp/google") is None:
        pytest.skip("the provider mirror has no hashicorp/google: these roots are checked by python-hcl2 and checkov")
    terraform(root, "init", "-backend=false")
    assert "The configuration is valid" in terraform(root, "validate")


# Prefixes that would change what a grant means, each with the words of the module's refusal.
# `bucket-memory policy` refuses each too (test_policy.py).
HOSTILE_PREFIXES: list[tuple[str, str]] = [
    ('x") || !resource.name.startsWith("y', "no quote"),  # ends the GCS condition's string
    ('x\\") || true || ("', "no quote"),  # beats an escaping of quotes alone
    ("teams/*", "no wildcard"),
    ("teams/blue?", "no wildcard"),
    ("${aws:username}", "no wildcard"),  # an IAM policy variable
    ("teams/blue\n", "no wildcard"),
    ("teams/bl\u0435e", "ASCII letters"),  # a Cyrillic e
    ("teams/blue ", "ASCII letters"),
    ("/teams/blue", "no leading /"),
    ("teams//blue", "no empty segment"),
    ("teams/../red", "a . or .. segment"),
    ("./teams", "a . or .. segment"),
    ("teams/log", "log, checkpoints or erasures segment"),
    ("teams/erasures/blue", "log, checkpoints or erasures segment"),  # its agents would write the records
    ("x" * 944, "at most 943 characters"),
]
# Tenant tags that would end or nest the ${aws:PrincipalTag/NAME} variable, or that AWS reserves.
HOSTILE_TENANT_TAGS = ["", "a}b", "${x}", "a*", "a/b", "a b", 'a"b', "AWS:x", "t\u0435nant", "x" * 129]
# Prefixes both accept.
GOOD_PREFIXES = ["", "teams/blue", "teams/blue/", "a.b=c-d_E/F9", "..x/x..", "x" * 943]

BAD_INPUTS: list[tuple[dict[str, Any], str]] = [
    ({"bucket_name": "Memory_Bucket"}, "valid S3 bucket name"),
    *(({"prefixes": [prefix]}, message) for prefix, message in HOSTILE_PREFIXES),
    ({"prefixes": []}, "at least one memory prefix"),
    ({"noncurrent_version_days": 0}, "at least 1"),
    ({"kms_key_arn": "arn:aws:kms:us-east-1:123456789012:alias/memory"}, "alias ARN cannot be granted"),
    ({"bucket_policy_documents": ['{"Version": "2012-10-17"}']}, "Statement list"),
    *(({"tenant_tag": tag}, "tenant_tag is 1 to 128") for tag in HOSTILE_TENANT_TAGS),
]


def test_bad_inputs_are_refused_with_their_message(terraform: Terraform) -> None:
    """One `validate` of a root calling the module once per bad input: each call fails its own rule."""
    calls: dict[str, dict[str, Any]] = {
        f"bad_{index}": {"source": "../modules/s3-memory-bucket", "bucket_name": "memory-bucket", **inputs}
        for index, (inputs, _) in enumerate(BAD_INPUTS)
    }
    calls["good"] = {"source": "../modules/s3-memory-bucket", "bucket_name": "memory-bucket", "prefixes": GOOD_PREFIXES}
    calls["tenant"] = {
        "source": "../modules/s3-memory-bucket",
        "bucket_name": "memory-bucket",
        "tenant_tag": "a.b:c=d+e@f-g_9",
    }
    root = terraform.tree / "bad-inputs"
    root.mkdir()
    # JSON values are HCL literals but for templates, whose $ and % HCL escapes by doubling them.
    # HCL syntax (not .tf.json) gives each diagnostic its module's name.
    (root / "main.tf").write_text(
        "\n".join(
            f'module "{name}" {{\n' + "".join(f"  {key} = {_hcl(value)}\n" for key, value in inputs.items()) + "}"
            for name, inputs in calls.items()
        )
    )
    terraform("bad-inputs", "init", "-backend=false")
    diagnostics = json.loads(terraform.refused("bad-inputs", "validate", "-json"))["diagnostics"]
    refused = {
        diagnostic["snippet"]["context"].split('"')[1]: " ".join(diagnostic["detail"].split())
        for diagnostic in diagnostics
        if diagnostic["summary"] == "Invalid value for variable"
    }
    assert set(refused) == {f"bad_{index}" for index in range(len(BAD_INPUTS))}, diagnostics
    for index, (inputs, message) in enumerate(BAD_INPUTS):
        assert message in refused[f"bad_{index}"], (inputs, refused[f"bad_{index}"])


def _hcl(value: Any) -> str:
    return json.dumps(value).replace("${", "$${").replace("%{", "%%{")


def test_both_modules_validate_prefixes_alike() -> None:
    """The GCS module cannot be validated without its provider; its prefix rules are the S3 module's."""
    import hcl2

    def prefix_rules(module: str) -> Any:
        with (TERRAFORM_TREE / "modules" / module / "variables.tf").open() as file:
            variables = hcl2.load(file)["variable"]
        return next(block for block in variables if '"prefixes"' in block or "prefixes" in block)

    s3, gcs = prefix_rules("s3-memory-bucket"), prefix_rules("gcs-memory-bucket")
    assert next(iter(s3.values()))["validation"] == next(iter(gcs.values()))["validation"]


def test_the_gcs_modules_conditions_are_what_policy_prints(terraform: Terraform) -> None:
    """The GCS module's locals, evaluated by terraform without the google provider (a root holding
    them alone), equal `gcs_condition` and `gcs_write_condition`."""
    source = (TERRAFORM_TREE / "modules" / "gcs-memory-bucket" / "main.tf").read_text()
    start = source.index("\nlocals {") + 1
    end = source.index("\n}\n", start) + 3
    root = terraform.tree / "gcs-conditions"
    root.mkdir()
    (root / "main.tf").write_text(
        'variable "bucket_name" {\n  type = string\n}\nvariable "prefixes" {\n  type = list(string)\n}\n'
        + source[start:end]
        + 'output "access_condition" {\n  value = local.whole_bucket ? null : local.condition\n}\n'
        + 'output "write_condition" {\n  value = local.write_condition\n}\n'
    )
    terraform("gcs-conditions", "init")
    for given in (["teams/blue", "teams/blue/", "ops"], ["", "teams/blue"]):
        variables = ["-var", "bucket_name=acme", "-var", f"prefixes={_hcl(given)}"]
        terraform("gcs-conditions", "apply", "-auto-approve", *variables)
        outputs = terraform.outputs("gcs-conditions")  # a null output is left out
        prefixes = list(dict.fromkeys(f"{prefix.strip('/')}/" if prefix.strip("/") else "" for prefix in given))
        assert outputs.get("access_condition") == gcs_condition("acme", prefixes), given
        assert outputs["write_condition"] == gcs_write_condition("acme", prefixes), given


@pytest.fixture(scope="module")
def applied(terraform: Terraform, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """The S3 module and two users holding its policies, applied to an IAM-enforcing moto; yields
    the outputs and what the bucket got, with the environment pointing at the server."""
    import botocore.session

    root = "s3-on-moto"
    shutil.copytree(Path(__file__).parent / "terraform_roots" / root, terraform.tree / root)
    with moto_server(enforce_iam_after=UNCHECKED_ACTIONS) as endpoint, pytest.MonkeyPatch.context() as environment:
        point_at_moto(environment, endpoint)
        session = botocore.session.get_session()
        key = session.create_client("kms").create_key(Description="memory")["KeyMetadata"]["Arn"]
        terraform(root, "init")
        terraform(root, "apply", "-auto-approve", "-var", f"endpoint={endpoint}", "-var", f"kms_key_arn={key}")
        outputs = terraform.outputs(root)
        s3 = session.create_client("s3")
        bucket = {
            "versioning": s3.get_bucket_versioning(Bucket="applied").get("Status"),
            "lifecycle": s3.get_bucket_lifecycle_configuration(Bucket="applied")["Rules"],
            "policy": json.loads(s3.get_bucket_policy(Bucket="applied")["Policy"]),
            "encryption": s3.get_bucket_encryption(Bucket="applied")["ServerSideEncryptionConfiguration"],
        }
        # moto ignores the aws:SecureTransport condition, so DenyInsecureTransport would refuse every
        # request: checked above, it goes before the memory is used through the IAM policies.
        s3.delete_bucket_policy(Bucket="applied")
        _spend_unchecked_actions(session)

        def act_as(user: str) -> None:
            environment.setenv("AWS_ACCESS_KEY_ID", outputs["keys"][user]["id"])
            environment.setenv("AWS_SECRET_ACCESS_KEY", outputs["keys"][user]["secret"])

        yield {**outputs, "bucket": bucket, "kms_key": key, "act_as": act_as}


def _spend_unchecked_actions(session: Any) -> None:
    """Make requests with a key moto never issued until one is refused: from then on, IAM is enforced."""
    client = session.create_client("s3", aws_access_key_id="AKIANOBODY", aws_secret_access_key="nobody")

    def refused(_: int) -> bool:
        try:
            client.list_buckets()
        except client.exceptions.ClientError:
            return True
        return False

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        for _ in range(UNCHECKED_ACTIONS // 100):
            if any(pool.map(refused, range(100))):
                return
    raise AssertionError(f"moto still authorizes nothing after {UNCHECKED_ACTIONS} actions")


@pytest.mark.slow  # the provider waits about a minute on moto's lifecycle answer
def test_the_bucket_is_as_the_module_says(applied: dict[str, Any]) -> None:
    bucket = applied["bucket"]
    assert bucket["versioning"] == "Enabled"
    (rule,) = bucket["lifecycle"]
    assert rule["Expiration"] == {"ExpiredObjectDeleteMarker": True}
    assert rule["NoncurrentVersionExpiration"]["NoncurrentDays"] == 30
    statements = {statement["Sid"]: statement for statement in bucket["policy"]["Statement"]}
    assert set(statements) == {"DenyInsecureTransport", "AuditorsList"}, "the extra document's statement joins"
    (encryption,) = bucket["encryption"]["Rules"]
    assert encryption["ApplyServerSideEncryptionByDefault"]["KMSMasterKeyID"] == applied["kms_key"]
    assert applied["memory_urls"] == ["s3://applied/teams/blue", "s3://applied/teams/green"]


@pytest.mark.slow  # the provider waits about a minute on moto's lifecycle answer
def test_both_policies_grant_the_key_and_only_the_operator_reads_versions(applied: dict[str, Any]) -> None:
    def statements(output: str) -> dict[str, Any]:
        return {statement["Sid"]: statement for statement in json.loads(applied[output])["Statement"]}

    agent, operator = statements("access_policy_json"), statements("operator_policy_json")
    for policy in (agent, operator):
        assert policy["MemoryEncryptionKey"]["Resource"] == applied["kms_key"]
        assert sorted(policy["MemoryObjects"]["Resource"]) == [
            "arn:aws:s3:::applied/teams/blue/*",
            "arn:aws:s3:::applied/teams/green/*",
        ]
    assert not any("Version" in str(statement["Action"]) for statement in agent.values())
    assert agent["OnlyOperatorsWriteErasureRecords"]["Effect"] == "Deny"
    assert all(statement["Effect"] == "Allow" for statement in operator.values()), "operators write records"
    assert operator["ListMemoryVersions"]["Condition"]["StringLike"]["s3:prefix"] == ["teams/blue/*", "teams/green/*"]
    assert sorted(operator["ReadMemoryVersions"]["Resource"]) == sorted(agent["MemoryObjects"]["Resource"])
    assert sorted(operator["EraseMemoryVersions"]["Resource"]) == sorted(agent["MemoryObjects"]["Resource"])
    # `bucket-memory policy` writes the same grants.
    prefixes = ["teams/blue/", "teams/green/"]
    assert normalized(access_policy("applied", prefixes, applied["kms_key"])) == normalized(
        json.loads(applied["access_policy_json"])
    )
    assert normalized(operator_policy("applied", prefixes, applied["kms_key"])) == normalized(
        json.loads(applied["operator_policy_json"])
    )


def normalized(policy: dict[str, Any]) -> dict[str, Any]:
    """Statements by Sid, each value a sorted list: Terraform writes a list of one as a plain string."""

    def plain(value: Any) -> Any:
        if isinstance(value, dict):
            return {key: plain(item) for key, item in value.items()}
        return sorted(value) if isinstance(value, list) else [value]

    return {
        statement["Sid"]: plain({key: value for key, value in statement.items() if key != "Sid"})
        for statement in policy["Statement"]
    }


@pytest.mark.slow  # the provider waits about a minute on moto's lifecycle answer
async def test_the_agent_policy_admits_its_prefixes_and_refuses_others(applied: dict[str, Any]) -> None:
    applied["act_as"]("agent")
    for url in applied["memory_urls"]:
        async with open_store(url) as store:
            version = await store.write("plan.md", "ship\n", expected=None, origin=Origin())
            assert (await store.read("plan.md")).version == version
            assert [entry.path for entry in await store.list()] == ["plan.md"]
    # moto checks resource ARNs but not the s3:prefix condition, so the refusal shows on the objects.
    with pytest.raises(MemoryStoreError) as caught:
        async with open_store("s3://applied/teams/red") as other:
            await other.write("plan.md", "sneak\n", expected=None, origin=Origin())
    assert caught.value.code == "forbidden"


@pytest.mark.slow  # the provider waits about a minute on moto's lifecycle answer
def test_only_the_operator_writes_erasure_records_under_the_applied_policies(applied: dict[str, Any]) -> None:
    import botocore.exceptions
    import botocore.session

    record = "teams/blue/erasures/00000000000000000002-" + "0" * 64 + ".json"
    applied["act_as"]("operator")
    botocore.session.get_session().create_client("s3").put_object(Bucket="applied", Key=record, Body=b"{}")
    applied["act_as"]("agent")
    agent: Any = botocore.session.get_session().create_client("s3")
    assert agent.get_object(Bucket="applied", Key=record)["Body"].read() == b"{}"
    forgeries: list[Callable[[], object]] = [
        lambda: agent.put_object(Bucket="applied", Key=record, Body=b"forged"),
        lambda: agent.delete_object(Bucket="applied", Key=record),
        lambda: agent.put_object(Bucket="applied", Key="teams/green/nested/erasures/x", Body=b"x"),
    ]
    for forging in forgeries:
        with pytest.raises(botocore.exceptions.ClientError) as refused:
            forging()
        assert refused.value.response["Error"]["Code"] == "AccessDenied"
    applied["act_as"]("operator")
    botocore.session.get_session().create_client("s3").delete_object(Bucket="applied", Key=record)


@pytest.mark.slow  # the provider waits about a minute on moto's lifecycle answer
def test_only_the_operator_reads_old_versions(applied: dict[str, Any]) -> None:
    applied["act_as"]("agent")
    cli("put", "s3://applied/teams/blue", "notes.md", given="first\n")
    cli("rm", "s3://applied/teams/blue", "notes.md")
    refused = " ".join(cli("recover", "s3://applied/teams/blue", expect=3).split())
    assert "Using old versions under s3://applied/teams/blue/ was denied" in refused
    assert "operator_policy_json" in refused
    applied["act_as"]("operator")
    assert "every commit and checkpoint is whole and chained" in cli("verify", "s3://applied/teams/blue")
    assert "nothing to restore" in cli("recover", "s3://applied/teams/blue")
    # moto ignores the s3:prefix condition of ListBucketVersions, so the operator's limit to its
    # prefixes is checked in the policy (above), not here.


@pytest.mark.slow  # the provider waits about a minute on moto's lifecycle answer
def test_the_lambda_handler_runs_under_the_applied_policy(
    applied: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    from examples import lambda_handler

    applied["act_as"]("agent")
    monkeypatch.setenv("MEMORY_URL", "s3://applied/teams/green/inbox-agent")
    monkeypatch.delenv("MODEL", raising=False)
    try:
        lambda_handler.handler({"note": "call the bank"}, None)
        answer = lambda_handler.handler({"note": "water the plants"}, None)
        assert answer["pages"] == ["inbox/0001.md"] and lambda_handler.store is not None
        page = lambda_handler.loop.run_until_complete(lambda_handler.store.read("inbox/0001.md"))
        assert page.text == "- call the bank\n- water the plants\n"
    finally:  # what the Lambda runtime never does: close the warm client
        lambda_handler.loop.run_until_complete(lambda_handler.resources.aclose())
        lambda_handler.store = None


@pytest.mark.slow  # init and two applies (27 s); the tenant_tag rules are held in make test by the bad inputs'
def test_the_s3_modules_policies_are_what_policy_prints(terraform: Terraform) -> None:
    """The S3 module's policy documents, evaluated by terraform with the bucket's ARN given (a root
    holding its locals and documents alone: they need no API), equal `access_policy` and
    `operator_policy`, with and without a tenant tag."""
    source = (TERRAFORM_TREE / "modules" / "s3-memory-bucket" / "main.tf").read_text()
    documents = source[source.index("\nlocals {") + 1 :].replace("aws_s3_bucket.memory.arn", '"arn:aws:s3:::acme"')
    root = terraform.tree / "s3-documents"
    root.mkdir()
    (root / "main.tf").write_text(
        'provider "aws" {\n  region = "us-east-1"\n  access_key = "x"\n  secret_key = "x"\n'
        "  skip_credentials_validation = true\n  skip_requesting_account_id = true\n"
        "  skip_metadata_api_check = true\n}\n"
        + 'variable "prefixes" {\n  type = list(string)\n}\n'
        + "".join(
            f'variable "{name}" {{\n  type = string\n  default = null\n}}\n' for name in ("kms_key_arn", "tenant_tag")
        )
        + documents
        + 'output "access" {\n  value = data.aws_iam_policy_document.access.json\n}\n'
        + 'output "operator" {\n  value = data.aws_iam_policy_document.operator.json\n}\n'
    )
    terraform("s3-documents", "init")
    for tenant in (None, "tenant"):
        variables = ["-var", f"prefixes={_hcl(['teams/blue', 'ops/'])}"]
        variables += ["-var", f"tenant_tag={tenant}"] if tenant else []
        terraform("s3-documents", "apply", "-auto-approve", *variables)
        outputs = terraform.outputs("s3-documents")
        for output, made in (("access", access_policy), ("operator", operator_policy)):
            expected = made("acme", ["teams/blue/", "ops/"], tenant_tag=tenant)
            assert normalized(json.loads(outputs[output])) == normalized(expected), (output, tenant)
