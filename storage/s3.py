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

#: botocore retries for every S3 request of a store. "standard" mode retries transient failures (HTTP 500/502/
#: 503/504, throttling such as SlowDown / Throttling / RequestLimitExceeded, connection errors and timeouts) with
#: jittered exponential backoff: before retry n it waits rand(0, 1) * 2**(n-1) seconds, capped at 20 s. 6 attempts
#: in all (1 + 5 retries, about 15 s of backoff on average) ride out a burst of throttling or a restarting endpoint;
#: past that the store raises StoreIOError (an ArtifactError) naming the artifact. s3fs adds its own outer loop
#: (`retries`, 5 by default) for SlowDown and dropped connections only, so sustained throttling gets up to 5 x 6
#: attempts before failing. Override with `storage_options["config_kwargs"]["retries"]`, or with AWS_RETRY_MODE /
#: AWS_MAX_ATTEMPTS in the environment (botocore reads those when this default is not set).
S3_RETRIES: dict[str, Any] = {"mode": "standard", "total_max_attempts": 6}
RETRY_ENV_VARS = ("AWS_RETRY_MODE", "AWS_MAX_ATTEMPTS")


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
      so a cached listing would go stale;
    - `config_kwargs["retries"] = S3_RETRIES` (botocore "standard" retries of 5xx, throttling and connection
      errors), unless `storage_options` or AWS_RETRY_MODE / AWS_MAX_ATTEMPTS already configure retries.
    """
    opts: dict[str, Any] = dict(storage_options or {})
    client_kwargs = dict(opts.get("client_kwargs") or {})
    if not opts.get("endpoint_url") and not client_kwargs.get("endpoint_url"):
        endpoint = endpoint_from_env()
        if endpoint:
            client_kwargs["endpoint_url"] = endpoint
    opts["client_kwargs"] = client_kwargs
    config_kwargs = dict(opts.get("config_kwargs") or {})
    if "retries" not in config_kwargs and not any(os.environ.get(name, "").strip() for name in RETRY_ENV_VARS):
        config_kwargs["retries"] = dict(S3_RETRIES)
    if config_kwargs:
        opts["config_kwargs"] = config_kwargs
    opts.setdefault("skip_instance_cache", True)
    opts.setdefault("use_listings_cache", False)
    return opts
