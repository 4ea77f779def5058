"""A moto server whose S3 conditional writes are atomic, as S3's are: `python -m` this module.

moto checks `If-None-Match: *` (and `If-Match`) and then writes, without a lock, on a threaded
server, so two racing creates of one key could both succeed, the second overwriting the first.
The linearizability suite found it about once in a hundred loaded runs: an acknowledged commit
replaced by another writer's. S3 guarantees exactly one of them wins; here a lock around every
PutObject gives the same.
"""

from __future__ import annotations

import threading
from typing import Any

from moto.s3.responses import S3Response
from moto.server import main

_PUTS = threading.Lock()
_put_object = S3Response.put_object


def _atomic_put_object(self: S3Response) -> Any:
    with _PUTS:
        return _put_object(self)


S3Response.put_object = _atomic_put_object  # type: ignore[method-assign]

if __name__ == "__main__":
    main()
