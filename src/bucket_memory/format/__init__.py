"""The bytes stored objects are: the values they hold, canonical JSON, commits and checkpoints,
packed checkpoints, edits."""
