"""HTTPS for the test servers: each accepted connection wrapped in TLS, its handshake left to the
request's own thread (a client that never completes one cannot stall the accept loop)."""

from __future__ import annotations

import socket
import ssl
from typing import Any


def tls_accepted(accepted: tuple[socket.socket, Any], tls: ssl.SSLContext | None) -> tuple[socket.socket, Any]:
    """`socketserver.get_request`'s (connection, address), the connection in TLS when `tls` is set."""
    connection, address = accepted
    if tls is not None:
        connection = tls.wrap_socket(connection, server_side=True, do_handshake_on_connect=False)
    return connection, address
