"""A deterministic simulation of a memory's whole history, with auditors
(docs/decisions/028-deterministic-simulation.md)."""
