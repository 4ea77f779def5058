"""The distribution: `python -m build` makes a wheel and an sdist carrying the license, and the
wheel, installed alone in a clean virtual environment, imports and runs without any test package."""

from __future__ import annotations

import subprocess
import sys
import tarfile
import tomllib
import venv
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]

pytestmark = pytest.mark.slow  # a clean environment installs the harness's whole tree from the index


def run(*command: str | Path) -> str:
    completed = subprocess.run([str(part) for part in command], capture_output=True, text=True, check=False)
    assert completed.returncode == 0, f"{command}:\n{completed.stdout}\n{completed.stderr}"
    return completed.stdout


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("dist")
    run(sys.executable, "-m", "build", "--outdir", out, ROOT)
    (wheel,) = out.glob("*.whl")
    (sdist,) = out.glob("*.tar.gz")
    return {"wheel": wheel, "sdist": sdist}


def test_the_wheel_and_sdist_carry_the_license(built: dict[str, Path]) -> None:
    with zipfile.ZipFile(built["wheel"]) as wheel:
        names = wheel.namelist()
        (metadata,) = [name for name in names if name.endswith(".dist-info/METADATA")]
        text = wheel.read(metadata).decode()
    assert "License-Expression: Apache-2.0" in text and "License-File: LICENSE" in text
    assert any(name.endswith(".dist-info/licenses/LICENSE") for name in names)
    assert {
        "bucket_memory/browser/templates/base.html",
        "bucket_memory/browser/static/htmx.min.js",
        "bucket_memory/browser/static/browser.css",
        "bucket_memory/browser/static/times.js",
    } <= set(names)
    assert not any(name.startswith(("tests/", "examples/", "benchmarks/")) for name in names)
    with tarfile.open(built["sdist"]) as sdist:
        members = {Path(name).relative_to(Path(name).parts[0]).as_posix() for name in sdist.getnames()}
    assert {"LICENSE", "README.md", "pyproject.toml", "src/bucket_memory/files/store.py"} <= members


def test_the_wheel_runs_alone_in_a_clean_environment(built: dict[str, Path], tmp_path: Path) -> None:
    venv.create(tmp_path / "clean", with_pip=True)
    python = tmp_path / "clean" / "bin" / "python"
    run(python, "-m", "pip", "install", "--quiet", built["wheel"])
    version = run(tmp_path / "clean" / "bin" / "bucket-memory", "--version")
    assert PROJECT["version"] in version
    installed = run(python, "-m", "pip", "list", "--format=freeze").lower()
    for test_only in ("pytest", "moto", "hypothesis", "mypy", "ruff", "fake-gcs-server"):
        assert f"\n{test_only}==" not in f"\n{installed}", f"{test_only} was installed with the runtime"
    # The core imports and a local memory works with the base install alone (no cloud SDK).
    script = (
        "import asyncio, sys, tempfile\n"
        "from a13n_harness.providers.memory import Origin\n"
        "from bucket_memory import open_store\n"
        "async def main():\n"
        "    async with open_store(tempfile.mkdtemp()) as store:\n"
        "        version = await store.write('a.md', 'x\\n', expected=None, origin=Origin())\n"
        "        assert (await store.read('a.md')).version == version\n"
        "asyncio.run(main())\n"
        "assert 'aiobotocore' not in sys.modules and 'google.cloud.storage' not in sys.modules\n"
    )
    run(python, "-c", script)


def test_the_metadata_is_a_version_twine_checks(built: dict[str, Path]) -> None:
    """Issue 56: `make dist` failed: an unpinned build backend wrote Metadata-Version 2.5, which
    `twine check` (6.x, the Makefile's) refuses; pyproject.toml bounds hatchling to one that writes 2.4."""
    with zipfile.ZipFile(built["wheel"]) as wheel:
        (metadata,) = [name for name in wheel.namelist() if name.endswith(".dist-info/METADATA")]
        first = wheel.read(metadata).decode().splitlines()[0]
    assert first == "Metadata-Version: 2.4", first
