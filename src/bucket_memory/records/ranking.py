"""How record memory ranks a search: both rankings fused, or one of them. Imports nothing, so that
the command line's --help can name the choices without loading the harness."""

from __future__ import annotations

from typing import Literal

type Ranking = Literal["hybrid", "vectors", "bm25"]
RANKINGS: tuple[Ranking, ...] = ("hybrid", "vectors", "bm25")
