"""The emulators' own failures: one that cannot start says why, in the child's words or by the
package it needs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest


def test_an_emulator_that_cannot_start_says_why() -> None:
    """Issue 45: outside the dev venv the emulator died and the traceback hid the child's own error;
    a missing package is named with the extra to install, before anything starts."""
    from bucket_memory.testing import emulators

    dying = [sys.executable, "-c", "import sys; sys.exit('ModuleNotFoundError: No module named moto')"]
    with pytest.raises(RuntimeError, match="No module named moto"), emulators._serving(dying, "/", {}):
        pass
    assert emulators._missing("s3") is None and emulators._missing("gcs") is None  # the dev venv has both
    completed = subprocess.run(
        [
            sys.executable,
            "-S",
            "-c",
            "import sys; sys.path[:0] = [sys.argv[1]]; from bucket_memory.testing.emulators import main; main(['s3'])",
            str(Path(__file__).parent.parent / "src"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert completed.returncode == 2 and 'pip install -e ".[emulators]"' in completed.stderr, completed.stderr
