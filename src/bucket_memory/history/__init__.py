"""The past: the retained log as a checked chain, lineages, stored versions, recovery and erasure."""
