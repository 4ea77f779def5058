"""The commit log: reading it, keeping the head fresh, group and fleet commit, runs, checkpoints and compaction."""
