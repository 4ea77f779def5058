"""A deterministic simulation of a memory's whole history, with auditors
(docs/design.md, "Deterministic simulation")."""
