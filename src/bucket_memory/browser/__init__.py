"""The memory browser behind `bucket-memory browse`: server-rendered pages over one memory.

`access` decides who may use it (a secret token, loopback only), `headers` keeps other pages from
framing it or running script in it, and `pages` renders the files, history, diffs, change feed,
search and records, and the confirmed restore and rollback.
"""

from .access import new_token
from .pages import browser_app

__all__ = ["browser_app", "new_token"]
