"""A string-to-string mapping persisted in the artifact store: the prompt cache of the LLM backends.

`StoreMapping(store, "llm-cache")` keeps each entry as one small JSON object `{"value": ...}` at
`<prefix>/<key[:2]>/<key>.json` (two-character shards keep directory listings short), written atomically by
the store with its checksum sidecar. So

    CachedGenerator(GeminiGenerator(...), StoreMapping(store, "llm-cache"))

never sends one prompt twice, across runs and machines sharing the store (local disk or S3). Keys are the
sha256 hex digests `CachedGenerator` produces; anything but lower-case hex is refused. A damaged entry reads
as missing (with a warning), so it is regenerated and overwritten; a store that cannot be reached (S3 failing
after retries) raises `StoreIOError` instead of looking like a miss.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator, MutableMapping

from larev.errors import ArtifactError, ConfigError
from storage.store import ArtifactStore, StoreIOError, validate_key

log = logging.getLogger(__name__)

_HEX_KEY = re.compile(r"^[0-9a-f]{8,128}$")
_SUFFIX = ".json"


class StoreMapping(MutableMapping[str, str]):
    """MutableMapping[str, str] over `<prefix>/<key[:2]>/<key>.json` objects of an ArtifactStore.

    Safe to use from several threads (each entry is its own atomic write). Iteration lists the prefix
    (two listing levels), so `len()` and `iter()` cost one listing per shard.
    """

    def __init__(self, store: ArtifactStore, prefix: str):
        self.store = store
        self.prefix = validate_key(prefix.strip("/"))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.store!r}, {self.prefix!r})"

    def key_path(self, key: str) -> str:
        """The artifact key of one entry; ConfigError unless `key` is 8-128 lower-case hex characters."""
        if not isinstance(key, str) or not _HEX_KEY.match(key):
            raise ConfigError(f"invalid cache key {key!r}: expected a lower-case hex digest (e.g. sha256)")
        return f"{self.prefix}/{key[:2]}/{key}{_SUFFIX}"

    def __getitem__(self, key: str) -> str:
        path = self.key_path(key)
        try:
            obj = self.store.read_json(path)
        except StoreIOError:  # the store is unreachable: not a missing entry (no regeneration, no probing again)
            raise
        except ArtifactError as exc:
            if self.store.exists(path):
                log.warning("cache entry %s is damaged (%s); treating it as missing", self.store.uri(path), exc)
            raise KeyError(key) from None
        if not isinstance(obj, dict) or not isinstance(obj.get("value"), str):
            log.warning("cache entry %s has no string 'value'; treating it as missing", self.store.uri(path))
            raise KeyError(key)
        return obj["value"]

    def __setitem__(self, key: str, value: str) -> None:
        if not isinstance(value, str):
            raise TypeError(f"StoreMapping values are strings, got {type(value).__name__}")
        self.store.write_json(self.key_path(key), {"value": value}, indent=None)

    def __delitem__(self, key: str) -> None:
        if not self.store.delete(self.key_path(key)):
            raise KeyError(key)

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and bool(_HEX_KEY.match(key)) and self.store.exists(self.key_path(key))

    def __iter__(self) -> Iterator[str]:
        for shard in self.store.ls(self.prefix):
            for entry in self.store.ls(shard):
                name = entry.rsplit("/", 1)[-1]
                if name.endswith(_SUFFIX) and _HEX_KEY.match(name[:-len(_SUFFIX)]):
                    yield name[:-len(_SUFFIX)]

    def __len__(self) -> int:
        return sum(1 for _ in self)
