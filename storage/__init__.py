"""Artifact storage for pipeline steps: local disk or S3, atomic writes, checksums, model directories."""

from storage.store import ArtifactStore, sha256_bytes, sha256_file, validate_key

__all__ = ["ArtifactStore", "sha256_bytes", "sha256_file", "validate_key"]
