"""Loopback helpers shared by tests that start servers or process groups (127.0.0.1 only)."""

import socket


def free_port() -> int:
    """A TCP port that is free on 127.0.0.1 right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]
