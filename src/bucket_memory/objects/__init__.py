"""Buckets: the object-store interface with its local and in-memory backends, S3 and GCS, retries, credentials, URLs."""
