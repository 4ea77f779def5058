"""The memory browser behind `bucket-memory browse`: server-rendered pages over one memory.

`access` decides who may use it (a secret token, loopback only), `headers` keeps other pages from
framing it or running script in it, and `app` serves the pages: `feed` (the file list and the
change feed), `files` (a file and its history), `diff`, `search` (text and records), and `restore`
(the confirmed restore and rollback), on what they share in `pages`; `errors` makes a page of what
went wrong.
"""

from .access import new_token
from .app import browser_app

__all__ = ["browser_app", "new_token"]
