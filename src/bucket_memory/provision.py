"""`bucket-memory init`: a memory bucket with the settings of the Terraform modules, for people without Terraform.

Versioning on (what `recover` reads), noncurrent versions expiring after `NONCURRENT_VERSION_DAYS`,
delete markers expiring once no version is left under them (on S3), incomplete multipart uploads
aborted after `ABORT_MULTIPART_DAYS`, public access blocked, encryption at rest, (on S3) a TLS-only
bucket policy, and (on a new GCS bucket) soft delete off. A test holds the modules to these values.

On a bucket that exists, init adds its settings beside what is there and never removes anything:
its lifecycle rule and policy statement join the existing ones (each known by its ID), existing
default encryption is kept, and a setting it cannot merge is refused with a message. It first
makes a plan of every step, which `dry_run` shows without changing anything.

This module holds the plan and the options; `provision_s3` and `provision_gcs` plan each cloud's
bucket and carry the plan out.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from a13n_harness.providers.memory import MemoryStoreError

NONCURRENT_VERSION_DAYS = 30
ABORT_MULTIPART_DAYS = 1


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
        from .provision_s3 import init_s3

        return init_s3(where.bucket, options, dry_run)
    if where.scheme == "gs":
        from .provision_gcs import init_gcs

        return init_gcs(where.bucket, options, dry_run)
    raise MemoryStoreError("invalid_path", f"{url}: init makes s3:// or gs:// buckets; a local path needs none.")


class VersioningOff(MemoryStoreError):
    """An existing bucket keeps no versions and init was not asked to turn them on: the caller's
    choice to make (--enable-versioning, or another bucket), not a failure of the cloud."""


def versioning_off(bucket: str) -> MemoryStoreError:
    return VersioningOff(
        "unavailable",
        f"The bucket {bucket} exists with object versioning off, so `recover` could not bring back deleted "
        "memories. Run init again with --enable-versioning to turn it on (old versions are then kept for "
        f"{NONCURRENT_VERSION_DAYS} days and billed as storage), or choose another bucket.",
    )
