"""A memory as of one commit: its files, directories and change feed, the intents settled lately,
mutations as values."""
