"""Secrets stay secret: a pipeline that uses a planted Gemini API key (LLM antonyms, against a loopback Gemini)
and planted S3 credentials (an s3:// artifact root, against a loopback S3 server) writes neither secret into any
artifact, cache record, run file, log record (every library at DEBUG), console output or anything the Prefect
API keeps (flow and task runs, logs, artifacts, blocks)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from flows.pipeline import larev_pipeline
from larev.methods.leakage_aware.antonyms import AntonymConfig
from larev.methods.rora.config import RoraConfig
from tests.fake_gemini import FakeGemini, gemini  # noqa: F401  (the loopback Gemini fixture)
from tests.test_antonyms import _answer_from_prompt
from tests.test_flows import TINY_LAREV, tiny_params

pytestmark = pytest.mark.usefixtures("prefect_harness")

GEMINI_KEY = "AIzaPLANTED-gemini-key-0123456789abcdef"
AWS_KEY_ID = "AKIAPLANTEDKEYID0123"
AWS_SECRET = "PLANTED/aws+secret/0123456789abcdefGHIJKLMN"


def _bucket_objects(s3_server, bucket: str) -> dict[str, bytes]:
    s3 = s3_server.client()
    keys = [o["Key"] for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket)
            for o in page.get("Contents", [])]
    return {f"s3://{bucket}/{k}": s3.get_object(Bucket=bucket, Key=k)["Body"].read() for k in keys}


def _prefect_records() -> dict[str, bytes]:
    """What the Prefect API keeps of the session's runs: flow and task runs (parameters, states), logs,
    artifacts, block documents (secrets included)."""
    import httpx
    from prefect.settings import PREFECT_API_URL

    api = PREFECT_API_URL.value().rstrip("/")
    queries = {"prefect flow runs": "/flow_runs/filter", "prefect task runs": "/task_runs/filter",
               "prefect logs": "/logs/filter", "prefect artifacts": "/artifacts/filter",
               "prefect blocks": "/block_documents/filter"}
    out = {}
    for name, path in queries.items():
        body = {"limit": 200, "offset": 0, **({"include_secrets": True} if "block" in path else {})}
        response = httpx.post(api + path, json=body, timeout=30)
        response.raise_for_status()
        assert response.json(), f"the API returned no {name}"
        out[name] = response.content
    return out


def test_planted_secrets_reach_no_output(s3_server, gemini, tmp_path, monkeypatch, caplog, capfd):  # noqa: F811
    for name, value in s3_server.env().items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", AWS_KEY_ID)  # moto's server accepts any credentials
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", AWS_SECRET)
    monkeypatch.setenv("GEMINI_API_KEY", GEMINI_KEY)
    monkeypatch.setenv("GOOGLE_GEMINI_BASE_URL", gemini.url)  # the google-genai client's endpoint override
    gemini.responder = lambda req: (200, _answer_from_prompt(FakeGemini.prompt_of(req)), 0.0)
    gemini.replies.append((500, None, 0.0))  # one failure: the retry path logs too
    bucket = s3_server.new_bucket()
    larev = TINY_LAREV.model_copy(update={"antonyms": AntonymConfig(backend="llm")})
    params = tiny_params(tmp_path, artifact_root=f"s3://{bucket}/larev", larev=larev, rora=RoraConfig(enabled=False))
    with caplog.at_level(logging.DEBUG):
        result = larev_pipeline(params)

    # the run did use both secrets
    assert gemini.requests and {r["key"] for r in gemini.requests} == {GEMINI_KEY}
    assert any(k.endswith("environments.parquet") for k in _bucket_objects(s3_server, bucket))

    outputs = _bucket_objects(s3_server, bucket)  # artifacts, cache records, the LLM prompt cache
    outputs |= {str(p): p.read_bytes() for p in Path(tmp_path).rglob("*") if p.is_file()}  # run dir, local files
    console = capfd.readouterr()
    outputs |= {"stdout": console.out.encode(), "stderr": console.err.encode(), "log records": caplog.text.encode()}
    outputs |= _prefect_records()
    outputs["returned result"] = repr(result).encode()
    assert len(outputs) > 50
    for secret in (GEMINI_KEY, AWS_SECRET):  # nowhere, even with every library logging at DEBUG
        leaked = [where for where, data in outputs.items() if secret.encode() in data]
        assert not leaked, f"{secret[:12]}... found in {leaked}"
    # The access key id is an identifier sent in clear in every S3 request's Authorization header: botocore's own
    # DEBUG records of those headers hold it. Everything else must not.
    leaked = [where for where, data in outputs.items() if where != "log records" and AWS_KEY_ID.encode() in data]
    leaked += [r.name for r in caplog.records if AWS_KEY_ID in r.getMessage()
               and not (r.name.startswith(("botocore.", "aiobotocore.")) and r.levelno == logging.DEBUG)]
    assert not leaked, f"the AWS access key id found in {leaked}"


def test_result_storage_settings_never_carry_credentials():
    from tasks.runtime.results import _without_secrets

    options = {"key": "AKIA", "secret": "s3cr3t", "anon": False,
               "client_kwargs": {"endpoint_url": "http://minio:9000", "aws_secret_access_key": "s3cr3t",
                                 "aws_access_key_id": "AKIA"},
               "config_kwargs": {"retries": {"mode": "standard"}}}
    assert _without_secrets(options) == {"anon": False, "client_kwargs": {"endpoint_url": "http://minio:9000"},
                                         "config_kwargs": {"retries": {"mode": "standard"}}}
