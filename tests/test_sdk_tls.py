"""Over HTTPS the SDKs verify the API's certificate against the CA certificates httpcore2
uses (``SSL_CERT_FILE`` included), and a certificate they refuse is named in the error the
user sees, not hidden behind the SDK's "Connection error.". A real TLS server: the fake API
on a self-signed certificate made by ``openssl``, in fresh interpreters."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from tests.fakeapi import FakeAPI, Turn

REPO = Path(__file__).resolve().parents[1]

STREAM = """
import asyncio, json, sys
from agent_ls.models.{module} import {model}
from agent_ls.ports.messages import Message, TextBlock
from agent_ls.ports.model import ModelError, ModelRequest
model = {model}("m", api_key="k", base_url=sys.argv[1])
async def main():
    {warm}
    request = ModelRequest(
        messages=[Message(role="user", content=[TextBlock("hi")])], system="s", tools=[]
    )
    try:
        return [type(e).__name__ async for e in model.stream(request)][-1]
    except ModelError as exc:
        return "ModelError: " + str(exc)
print(json.dumps(asyncio.run(main())))
"""
MODELS = {"anthropic": "AnthropicModel", "openai": "OpenAIModel"}
WARM = {
    "worker": "await model.warm_then_rehearse(lambda: None, lambda: False)",
    "in process": "await model.warm()",
}  # the two ways the client is made ahead of the first request


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    folder = tmp_path_factory.mktemp("tls")
    cert, key = folder / "cert.pem", folder / "key.pem"
    request = ["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1"]
    subject = ["-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"]
    subprocess.run(
        ["openssl", *request, "-keyout", str(key), "-out", str(cert), *subject],
        check=True,
        capture_output=True,
        timeout=60,
    )
    return str(cert), str(key)


def stream_over_https(sdk: str, warm: str, certificate: tuple[str, str], **env: str) -> Any:
    with FakeAPI(tls=certificate) as api:
        api.enqueue(Turn(text="hello"))
        url = api.url + ("/v1" if sdk == "openai" else "")
        script = STREAM.format(module=sdk, model=MODELS[sdk], warm=WARM[warm])
        clean = {k: v for k, v in os.environ.items() if not k.startswith("SSL_CERT_")}
        proc = subprocess.run(
            [sys.executable, "-c", textwrap.dedent(script), url],
            capture_output=True,
            text=True,
            timeout=120,
            cwd=REPO,
            env={**clean, "PYTHONPATH": str(REPO), **env},
        )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("warm", sorted(WARM))
@pytest.mark.parametrize("sdk", sorted(MODELS))
def test_https_verifies_against_the_ca_certificates_httpcore_uses(
    sdk: str, warm: str, certificate: tuple[str, str]
) -> None:
    trusted = stream_over_https(sdk, warm, certificate, SSL_CERT_FILE=certificate[0])
    assert trusted == "TurnComplete"
    # The system's CA certificates do not vouch for the fake API's: the request is refused.
    refused = stream_over_https(sdk, warm, certificate)
    assert refused.startswith("ModelError: cannot reach"), refused
    assert "CERTIFICATE_VERIFY_FAILED" in refused  # and the user is told why
