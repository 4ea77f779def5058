"""The one answer to missing or refused cloud credentials, whichever store or command meets them.

`ls`, `init`, a store's first request and `doctor` all say `forbidden` with the same advice (`init`
once said `unavailable`, which the guide says means a service that is down).
"""

from __future__ import annotations

from a13n_harness.providers.memory import MemoryStoreError


def no_aws_credentials(location: str) -> MemoryStoreError:
    return MemoryStoreError(
        "forbidden",
        f"No AWS credentials to reach {location}: set them the usual way (environment, profile, role).",
    )


def no_google_credentials(location: str, error: Exception) -> MemoryStoreError:
    return MemoryStoreError(
        "forbidden",
        f"No Google Cloud credentials to reach {location}: {str(error).rstrip('.')}. "
        "Run `gcloud auth application-default login` or set GOOGLE_APPLICATION_CREDENTIALS.",
    )
