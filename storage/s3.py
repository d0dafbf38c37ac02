"""s3fs options for an S3 artifact root: endpoint from the environment, no stale caches.

Credentials are never handled here: s3fs/botocore read AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,
AWS_SESSION_TOKEN and AWS_DEFAULT_REGION from the environment, unless `storage_options` passes
`key`/`secret`/`token` explicitly.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

#: Environment variables naming a custom S3 endpoint (MinIO, moto, ...), most specific first.
ENDPOINT_ENV_VARS = ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL")


def endpoint_from_env() -> str | None:
    """The S3 endpoint URL set in the environment, if any."""
    for name in ENDPOINT_ENV_VARS:
        value = os.environ.get(name, "").strip()
        if value:
            return value
    return None


def s3_filesystem_options(storage_options: Mapping[str, Any] | None) -> dict[str, Any]:
    """Keyword arguments for `s3fs.S3FileSystem`, built from the store's `storage_options`.

    - an endpoint given in `storage_options` (`endpoint_url` or `client_kwargs["endpoint_url"]`) wins;
      otherwise AWS_ENDPOINT_URL_S3 / AWS_ENDPOINT_URL is used when set (read when the filesystem is
      built, i.e. in the process that uses the store);
    - `skip_instance_cache=True`: each store gets its own client, so two stores with different
      endpoints or credentials never share one;
    - `use_listings_cache=False`: other processes (Prefect tasks, workers) write to the same bucket,
      so a cached listing would go stale.
    """
    opts: dict[str, Any] = dict(storage_options or {})
    client_kwargs = dict(opts.get("client_kwargs") or {})
    if not opts.get("endpoint_url") and not client_kwargs.get("endpoint_url"):
        endpoint = endpoint_from_env()
        if endpoint:
            client_kwargs["endpoint_url"] = endpoint
    opts["client_kwargs"] = client_kwargs
    opts.setdefault("skip_instance_cache", True)
    opts.setdefault("use_listings_cache", False)
    return opts
