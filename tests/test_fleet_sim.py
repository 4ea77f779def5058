"""The fleet simulation (`benchmarks/fleet_sim.py`) as a program: a cell ends its virtual loop
cleanly, whatever it leaves in flight when the load stops."""

from __future__ import annotations

import gc
import logging

import pytest
from benchmarks import fleet_sim


def test_a_cell_ends_with_no_task_left_pending(caplog: pytest.LogCaptureFixture) -> None:
    """Writers past the end of a cell and housekeeping still in flight are cancelled and awaited as
    the loop ends. Before, they were left pending, and the garbage collector printed "Task was
    destroyed but it is pending" after the JSON of `python -m benchmarks.fleet --writers 16`."""
    caplog.set_level(logging.ERROR, logger="asyncio")
    row = fleet_sim.simulate(fleet_sim.Cell(16, 0.5, seconds=2.0), fleet_sim.Protocol())
    gc.collect()  # a pending task complains when it is collected
    assert row["commits"] > 0
    assert [record.getMessage() for record in caplog.records if "pending" in record.getMessage()] == []
