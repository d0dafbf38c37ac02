"""ArtifactRef: what a step returns: where its output lives and the digest of its content.

Refs are small, JSON-serialisable pydantic models (Prefect persists them as JSON, never as pickles); the cache
key of a downstream step covers each input ref's content digest, so an upstream step that reruns and writes
byte-identical output does not invalidate what follows it.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict


class ArtifactRef(BaseModel):
    model_config = ConfigDict(frozen=True)

    uri: str  # full location: an absolute local path or s3://bucket/prefix/...
    key: str  # the key relative to the store's root
    digest: str  # sha256 of the file, or the combined digest of a directory's manifest
    kind: Literal["table", "model", "json", "text", "image", "dir"] = "table"

    def __str__(self) -> str:
        return self.uri
