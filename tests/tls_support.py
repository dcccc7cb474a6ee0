"""A throwaway self-signed certificate, so the local test servers can serve HTTPS as a hosted API does."""

from __future__ import annotations

import shutil
import ssl
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest


@dataclass(frozen=True)
class TLSFiles:
    """A certificate for localhost and 127.0.0.1 (also its own CA bundle) and its private key."""

    cert: Path
    key: Path

    def server_context(self) -> ssl.SSLContext:
        """The server side: give it to `LLMServer(tls=...)` or `LocalCRSServer(tls=...)`."""
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(self.cert, self.key)
        return context


def self_signed(folder: Path) -> TLSFiles:
    """Make the certificate with the `openssl` command (skip the test where it is missing)."""
    if shutil.which("openssl") is None:
        pytest.skip("needs the openssl command to make a test certificate")
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=localhost",
         "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True,
    )  # fmt: skip
    return TLSFiles(cert, key)
