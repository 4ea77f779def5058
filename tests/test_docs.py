"""Every `python` block of the user guide runs as written (S3 ones against moto)."""

from __future__ import annotations

import re
import runpy
from pathlib import Path
from typing import Any

import pytest

GUIDE = Path(__file__).parent.parent / "docs" / "guide.md"
BLOCKS = re.findall(r"^```python\n(.*?)^```", GUIDE.read_text(), flags=re.S | re.M)


@pytest.mark.parametrize("source", BLOCKS, ids=[f"block{index}" for index in range(len(BLOCKS))])
def test_guide_example_runs(source: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    if "s3://" in source:
        request.getfixturevalue("s3_endpoint")
        import botocore.session

        bucket = re.search(r"s3://([^/\"]+)", source)
        assert bucket is not None
        client: Any = botocore.session.get_session().create_client("s3")
        if bucket[1] not in {b["Name"] for b in client.list_buckets()["Buckets"]}:
            client.create_bucket(Bucket=bucket[1])
    script = tmp_path / "example.py"
    script.write_text(source)
    runpy.run_path(str(script), run_name="__main__")


def test_the_guide_has_examples() -> None:
    assert len(BLOCKS) >= 4
