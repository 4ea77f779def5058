"""File memory: the harness's FileStore contract on the log, and line search."""
