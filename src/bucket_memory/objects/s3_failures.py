"""What a failed aiobotocore request means for the store: the S3 layer's error boundary."""

from __future__ import annotations

from a13n_harness.providers.memory import MemoryStoreError
from botocore.exceptions import (
    BaseEndpointResolverError,
    CapacityNotAvailableError,
    ClientError,
    ConnectionError,
    CredentialRetrievalError,
    DataNotFoundError,
    EndpointProviderError,
    HTTPClientError,
    InvalidConfigError,
    InvalidDNSNameError,
    InvalidS3AddressingStyleError,
    NoAuthTokenError,
    NoCredentialsError,
    ParamValidationError,
    PartialCredentialsError,
    ProfileNotFound,
    SSOError,
    TokenRetrievalError,
    UnknownSignatureVersionError,
    UnsupportedS3AccesspointConfigurationError,
    UnsupportedS3ArnError,
    UnsupportedS3ConfigurationError,
    ValidationError,
)

from .credentials import no_aws_credentials
from .interface import TransientError
from .s3_errors import Exists, Missing, S3Reply, s3_error

# What botocore raises before it sends a request (settings, parameters, credentials, the endpoint):
# the request never reached S3. Any other BotoCoreError may come after it did (a checksum or body
# that failed as the reply was read), so a create's outcome is then unknown: transient.
_BEFORE_SENDING = (
    ParamValidationError,
    ValidationError,
    BaseEndpointResolverError,
    EndpointProviderError,
    CredentialRetrievalError,
    NoAuthTokenError,
    TokenRetrievalError,
    SSOError,
    InvalidConfigError,
    DataNotFoundError,
    ProfileNotFound,
    UnknownSignatureVersionError,
    UnsupportedS3ArnError,
    UnsupportedS3ConfigurationError,
    UnsupportedS3AccesspointConfigurationError,
    InvalidS3AddressingStyleError,
    InvalidDNSNameError,
    CapacityNotAvailableError,
)


def botocore_failure(error: Exception, location: str, key: str, history: bool = False) -> Exception:
    """What `error`, raised by one request for `key` under `location`, means: `TransientError`, a
    `MemoryStoreError`, or one of the answers `Missing` and `Exists` for the caller to read. A
    `history` request reads old versions, which need permissions of their own."""
    if isinstance(error, ClientError):
        reply = S3Reply.of(error)
        if reply.code in ("NoSuchKey", "404") or (reply.status == 404 and reply.code != "NoSuchBucket"):
            return Missing()
        if reply.code == "PreconditionFailed" or reply.status == 412:
            return Exists()
        return s3_error(reply.code, reply.status, f"{location}/{key}", reply.message, history)
    if isinstance(error, NoCredentialsError | PartialCredentialsError):
        return no_aws_credentials(location)
    if isinstance(error, ConnectionError | HTTPClientError):
        return TransientError(f"{type(error).__name__}: {error}")
    if isinstance(error, _BEFORE_SENDING):
        return MemoryStoreError("unavailable", f"S3 request for {location}/{key} failed: {error}")
    # Body streams, checksums, aiohttp, timeouts: whatever nobody mapped may have reached S3.
    return TransientError(f"{type(error).__name__}: {error}")
