"""A writer process whose clock is off: `python -m tests.skewed_writer URL SKEW_SECONDS PATH TEXT`.

Both clocks a writer could consult, `time.time` and `datetime.now`, are moved before the store
is imported, as on a machine whose clock is wrong.
"""

from __future__ import annotations

import asyncio
import datetime
import sys
import time

skew = float(sys.argv[2])
_real_time = time.time
time.time = lambda: _real_time() + skew


class _SkewedDateTime(datetime.datetime):
    @classmethod
    def now(cls, tz: datetime.tzinfo | None = None) -> _SkewedDateTime:
        return cls.fromtimestamp(time.time(), tz)


datetime.datetime = _SkewedDateTime  # type: ignore[misc]

from a13n_harness.providers.memory import Origin  # noqa: E402

from bucket_memory import open_store  # noqa: E402


async def main(url: str, path: str, text: str) -> None:
    async with open_store(url) as store:
        await store.list()  # the server's clock is known from the first reply on
        await store.write(path, text, expected=None, origin=Origin(run_id=f"skew {skew:+.0f}s"))


asyncio.run(main(sys.argv[1], sys.argv[3], sys.argv[4]))
