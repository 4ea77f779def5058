"""Only an operator destroys a memory: a tombstone is `memory_deleted` only beside the destroy's proof
under `erasures/`, which the agents' grants cannot write; without it, it is a forged commit."""

from __future__ import annotations

import json
from typing import Any

import pytest
from a13n_harness.providers.memory import MemoryStoreError, Origin

from bucket_memory import LogFileStore, MemoryAdmin
from bucket_memory.destroy import Destroyer
from bucket_memory.format.signed import CorruptObjectError
from bucket_memory.format.tombstone import DESTROYED, PROOF_KEY
from bucket_memory.format.wire_values import PENDING_PREFIX, checkpoint_key, log_key
from bucket_memory.objects.interface import CREATE, Create, IfHolds, Overwrite
from bucket_memory.objects.memory import MemoryObjectStore
from bucket_memory.policy import access_policy, gcs_write_condition, operator_policy
from bucket_memory.testing.faults import Fault, Faults, FaultyObjectStore, Operation, SimulatedCrash
from bucket_memory.testing.versioned import VersionedMemoryObjectStore

from .helpers import cli, iam_enforced_moto
from .test_fleet import contend
from .test_policy import GRANTED, _cel_admits, _s3_allows

ALICE = Origin(principal_id="alice")
OPERATOR = Origin(principal_id="operator", run_id="bucket-memory recover")


async def test_an_agents_tombstone_is_a_forged_commit_that_recover_removes() -> None:
    """Was: a tombstone at the next log key, which PutObject under the prefix writes, made every
    store answer `memory_deleted` ("drop this store") and fan-out `verify` count the memory destroyed."""
    objects = VersionedMemoryObjectStore()
    alice = LogFileStore(objects)
    await alice.write("a.md", "A\n", expected=None, origin=ALICE)
    await objects.put(log_key(2), DESTROYED, CREATE)  # the agent's forgery

    for store in (alice, LogFileStore(objects)):  # warm and cold
        with pytest.raises(MemoryStoreError) as raised:
            await store.read("a.md")
        assert isinstance(raised.value, CorruptObjectError) and raised.value.key == log_key(2)
        assert raised.value.code != "memory_deleted" and "forg" in str(raised.value)
    admin = MemoryAdmin(LogFileStore(objects))
    assert {problem.key for problem in await admin.verify()} == {log_key(2)}
    await admin.recover(None, origin=OPERATOR)
    after = LogFileStore(objects)
    assert (await after.read("a.md")).text == "A\n"
    # Commit 2 is now recover's mark to load again (it removed a key a process may have read).
    assert await after.write("b.md", "B\n", expected=None, origin=ALICE) == "3"
    assert (await alice.read("b.md")).text == "B\n"  # the store that met the forgery serves on


async def test_the_operators_destroy_makes_a_forged_tombstone_one() -> None:
    """The proof is written before the seal, so a tombstone an agent left past the head becomes
    the seal; every store, the one that met the forgery among them, then answers `memory_deleted`."""
    objects = VersionedMemoryObjectStore()
    alice = LogFileStore(objects)
    await alice.write("a.md", "A\n", expected=None, origin=ALICE)
    await objects.put(log_key(2), DESTROYED, CREATE)
    with pytest.raises(CorruptObjectError):
        await alice.read("a.md")

    await Destroyer(objects).destroy()

    assert await objects.get(PROOF_KEY) == DESTROYED
    for store in (alice, LogFileStore(objects)):
        with pytest.raises(MemoryStoreError) as raised:
            await store.read("a.md")
        assert raised.value.code == "memory_deleted"


@pytest.mark.slow  # a moto server of its own, enforcing IAM (4 s); the two above hold the rule in memory
def test_on_moto_enforcing_iam_an_agent_cannot_destroy_and_the_operator_can() -> None:
    import botocore.exceptions
    import botocore.session

    url, prefix = "s3://acme/users/a", "users/a/"
    policies = {
        "agent": json.dumps(access_policy("acme", [prefix])),
        "operator": json.dumps(operator_policy("acme", [prefix])),
    }
    with iam_enforced_moto("acme", policies) as act_as:
        act_as("agent")
        cli("put", url, "a.md", given="A\n")
        agent: Any = botocore.session.get_session().create_client("s3")
        agent.put_object(Bucket="acme", Key=prefix + log_key(2), Body=DESTROYED)  # what PutObject allows
        with pytest.raises(botocore.exceptions.ClientError) as refused:
            agent.put_object(Bucket="acme", Key=prefix + PROOF_KEY, Body=DESTROYED)
        assert refused.value.response["Error"]["Code"] == "AccessDenied"
        said = cli("cat", url, "a.md", expect=3)
        assert "forgery" in said and "was destroyed" not in said

        act_as("operator")
        cli("destroy", url, "--yes")
        act_as("agent")
        assert "was destroyed" in cli("cat", url, "a.md", expect=3)


class _DestroyedAsPublished(MemoryObjectStore):
    """A bucket where a destroy runs whole just before an intent's create lands: after the destroy's
    last listing, as a writer mid-commit's can."""

    destroying = True

    async def put(self, key: str, data: bytes, mode: Create | IfHolds | Overwrite) -> None:
        if key.startswith(PENDING_PREFIX) and self.destroying:
            self.destroying = False
            await Destroyer(self).destroy()
        await super().put(key, data, mode)


async def test_a_writer_mid_commit_withdraws_the_intent_it_published_after_the_destroy() -> None:
    """Was: the intent (its write's text in it) stayed under pending/ after the destroy, until it
    was run again; and the warm store went on publishing intents on later writes."""
    objects = _DestroyedAsPublished()
    writer = LogFileStore(objects)
    await writer.write("a.md", "A\n", expected=None, origin=ALICE)
    contend(writer)

    for text in ("secret\n", "more\n"):
        with pytest.raises(MemoryStoreError) as raised:
            await writer.write("b.md", text, expected=None, origin=ALICE)
        assert raised.value.code == "memory_deleted"
        assert await objects.list(PENDING_PREFIX) == []
    assert not any(b"secret" in data for data, _ in objects.objects.values())


async def test_a_destroy_stopped_after_its_proof_leaves_the_memory_serving_until_run_again() -> None:
    """The proof alone seals nothing: stores read and write on, and the next run seals past them."""
    objects = VersionedMemoryObjectStore()
    alice = LogFileStore(objects)
    await alice.write("a.md", "A\n", expected=None, origin=ALICE)

    def proof_only(operation: Operation, key: str, count: int) -> Fault | None:
        return "crash_after" if (operation, key) == ("overwrite", PROOF_KEY) else None

    with pytest.raises(SimulatedCrash):
        await Destroyer(FaultyObjectStore(objects, Faults(script=proof_only))).destroy()

    assert not (await Destroyer(objects).plan()).sealed
    assert await alice.write("b.md", "B\n", expected=None, origin=ALICE) == "2"
    assert (await LogFileStore(objects).read("b.md")).text == "B\n"

    done = await Destroyer(objects).destroy()
    assert done.seal == 3
    with pytest.raises(MemoryStoreError) as raised:
        await alice.read("a.md")
    assert raised.value.code == "memory_deleted"


def test_only_operators_write_the_proof_on_s3_and_gcs() -> None:
    """The proof is under erasures/: the agents' Deny (S3, their memory and any nested under it) and
    their write binding's condition (GCS, each prefix named) refuse it, as they refuse erasure records."""
    for memory in ("teams/", "teams/blue/", "teams/green/x/"):
        assert not _s3_allows(access_policy("acme", GRANTED), "s3:PutObject", memory + PROOF_KEY)
        assert not _s3_allows(access_policy("acme", GRANTED), "s3:DeleteObject", memory + PROOF_KEY)
        assert _s3_allows(operator_policy("acme", GRANTED), "s3:PutObject", memory + PROOF_KEY)
        assert _s3_allows(access_policy("acme", GRANTED), "s3:PutObject", memory + log_key(2))  # a tombstone's key
    for memory in GRANTED:
        assert not _cel_admits(gcs_write_condition("acme", GRANTED), memory + PROOF_KEY)


async def test_an_agents_tombstone_at_a_checkpoint_key_is_passed_over_by_every_cold_start() -> None:
    """Was: a tombstone at a checkpoint key (or over the newest checkpoint) refused every cold start as
    destroyed; `destroy` leaves none there, so it is a forgery, passed over as any checkpoint that
    does not decode where the log reaches past it."""
    objects = VersionedMemoryObjectStore()
    alice = LogFileStore(objects)
    await alice.write("a.md", "A\n", expected=None, origin=ALICE)
    await alice.write("c.md", "C\n", expected=None, origin=ALICE)
    await objects.put(checkpoint_key(1), DESTROYED, CREATE)

    cold = LogFileStore(objects)
    assert (await cold.read("a.md")).text == "A\n"
    assert await cold.write("b.md", "B\n", expected=None, origin=ALICE) == "3"
    assert checkpoint_key(1) in {problem.key for problem in await MemoryAdmin(LogFileStore(objects)).verify()}
