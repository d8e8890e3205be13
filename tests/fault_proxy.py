"""A TCP proxy on 127.0.0.1 that injects faults between an HTTP client and a server.

Faults are decided per HTTP request (or per connection, ``per_request=False``) from one seeded
RNG, so a sequential client meets the same faults in every run:

- ``pass``: forward both ways.
- ``reset``: forward ``N`` more response bytes (``N`` uniform in ``reset_after_bytes``), then
  close the client socket with ``SO_LINGER 0`` (a TCP RST). ``N`` may fall in the headers or
  in the body. If the response ends first, the reset fires when the client sends its next
  request on that connection, so every reset decision hits a request.
- ``stall``: forward the request but no response bytes; hold the connection for
  ``stall_s`` (longer than the client's read timeout) or until the client gives up.
- ``throttle``: do not forward; answer ``503 SlowDown`` (S3's throttling reply) and close.

``latency_s`` delays every request by that long before it is forwarded (a distant bucket on
loopback: each request then costs a round trip, as it does in a cloud region).

``expect_rounds([k1, k2, ...])`` counts round trips without a clock: requests are held until
``k1`` of them are waiting, then released together, then ``k2``, and so on (after the last
round, requests pass). A client that sends a round's requests together releases each round at
once whatever the load; one that sends them one after another never fills a round, which is
then released after a generous timeout and recorded as timed out (``rounds``).

A new request is recognised by an HTTP method at the start of the client's bytes after the
server has answered (HTTP/1.1 clients do not pipeline), so keep-alive connections are faulted
request by request. One thread per connection runs a ``select`` loop over both sockets, so a
reset is sent at once (closing a socket another thread is blocked on would not send it).

Also: ``faulty_s3``, a pytest fixture factory putting a proxy in front of ``s3_server``.
"""

from __future__ import annotations

import random
import re
import select
import socket
import struct
import threading
import time
from dataclasses import dataclass, field
from typing import Literal

import pytest

Fault = Literal["pass", "reset", "stall", "throttle"]

_REQUEST_START = re.compile(rb"^(GET|HEAD|PUT|POST|DELETE|OPTIONS|PATCH) ")
_POLL_S = 0.1
_SLOW_DOWN_BODY = (
    b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>SlowDown</Code>'
    b"<Message>Please reduce your request rate.</Message><RequestId>fault-proxy</RequestId></Error>"
)


@dataclass
class FaultCounters:
    """Connections accepted, requests seen, and faults actually injected."""

    connections: int = 0
    requests: int = 0
    resets: int = 0
    stalls: int = 0
    throttles: int = 0

    @property
    def faults(self) -> int:
        return self.resets + self.stalls + self.throttles


@dataclass
class FaultProxy:
    """Context manager: listens on ``127.0.0.1:<port>`` (``url``) and forwards to the target."""

    target_host: str
    target_port: int
    reset_probability: float = 0.0
    stall_probability: float = 0.0
    throttle_probability: float = 0.0
    seed: int = 0
    reset_after_bytes: tuple[int, int] = (0, 4096)
    stall_s: float = 60.0
    per_request: bool = True
    latency_s: float = 0.0
    counters: FaultCounters = field(default_factory=FaultCounters)

    def __post_init__(self) -> None:
        odds = (self.reset_probability, self.stall_probability, self.throttle_probability)
        if min(odds) < 0 or sum(odds) > 1:
            raise ValueError(f"fault probabilities (reset, stall, throttle) must be >= 0 and sum to <= 1, got {odds}")
        self._rng = random.Random(self.seed)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._listener = socket.socket()
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(128)
        self.port = self._listener.getsockname()[1]
        self._threads: list[threading.Thread] = []
        self._acceptor = threading.Thread(target=self._accept_loop, name=f"fault-proxy-{self.port}", daemon=True)
        self._gate = threading.Condition()
        self._round_sizes: list[int] = []
        self._waiting: list[str] = []
        self._round_number = 0
        self._round_timeout_s = 20.0
        self.rounds: list[tuple[int, bool, list[str]]] = []  # (requests released, timed out, their request lines)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> FaultProxy:
        self._acceptor.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop accepting, end every connection (stalled ones included) and join the threads."""
        self._stop.set()
        if self._acceptor.is_alive():
            self._acceptor.join(5)
        self._listener.close()
        for thread in list(self._threads):
            thread.join(5)

    def set_fault_probabilities(self, *, reset: float = 0.0, stall: float = 0.0, throttle: float = 0.0) -> None:
        """Change the odds for requests from now on (e.g. to heal the endpoint mid-test)."""
        with self._lock:
            self.reset_probability, self.stall_probability, self.throttle_probability = reset, stall, throttle

    def expect_rounds(self, sizes: list[int], *, timeout_s: float = 20.0) -> None:
        """Hold the next requests in rounds of ``sizes`` (see the module docstring); clears
        ``rounds``."""
        with self._gate:
            self._round_sizes, self._waiting, self.rounds = list(sizes), [], []
            self._round_timeout_s = timeout_s

    def _hold(self, request_line: str) -> None:
        with self._gate:
            if not self._round_sizes:
                return
            mine = self._round_number
            self._waiting.append(request_line)
            if len(self._waiting) >= self._round_sizes[0]:
                self._release(timed_out=False)
                return
            deadline = time.monotonic() + self._round_timeout_s
            while self._round_number == mine:
                left = deadline - time.monotonic()
                if left <= 0:
                    self._release(timed_out=True)
                    return
                self._gate.wait(left)

    def _release(self, *, timed_out: bool) -> None:
        self.rounds.append((len(self._waiting), timed_out, self._waiting))
        self._waiting = []
        self._round_sizes.pop(0)
        self._round_number += 1
        self._gate.notify_all()

    # -- decisions --------------------------------------------------------------------------
    def _decide(self) -> tuple[Fault, int]:
        with self._lock:
            self.counters.requests += 1
            draw = self._rng.random()
            budget = self._rng.randint(*self.reset_after_bytes)
            if draw < self.reset_probability:
                return "reset", budget
            if draw < self.reset_probability + self.stall_probability:
                self.counters.stalls += 1
                return "stall", 0
            if draw < self.reset_probability + self.stall_probability + self.throttle_probability:
                self.counters.throttles += 1
                return "throttle", 0
            return "pass", 0

    def _count_reset(self) -> None:
        with self._lock:
            self.counters.resets += 1

    # -- sockets ----------------------------------------------------------------------------
    def _accept_loop(self) -> None:
        while not self._stop.is_set():
            readable, _, _ = select.select([self._listener], [], [], _POLL_S)
            if not readable:
                continue
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            with self._lock:
                self.counters.connections += 1
            thread = threading.Thread(target=self._serve, args=(client,), daemon=True)
            self._threads = [t for t in self._threads if t.is_alive()] + [thread]
            thread.start()

    def _serve(self, client: socket.socket) -> None:
        try:
            upstream = socket.create_connection((self.target_host, self.target_port), timeout=10)
        except OSError:
            client.close()
            return
        try:
            self._relay(client, upstream)
        except OSError:
            pass
        finally:
            for sock in (client, upstream):
                try:
                    sock.close()
                except OSError:
                    pass

    def _relay(self, client: socket.socket, upstream: socket.socket) -> None:
        fault: Fault = "pass"
        budget = 0
        answered = True  # the server has sent bytes since the last request started
        decided_for_connection = False
        stall_until = 0.0
        while not self._stop.is_set():
            watch = [client] if fault == "stall" else [client, upstream]
            readable, _, _ = select.select(watch, [], [], _POLL_S)
            if fault == "stall" and time.monotonic() > stall_until:
                return
            if client in readable:
                data = client.recv(65536)
                if not data:
                    return
                if answered and _REQUEST_START.match(data):
                    answered = False
                    if self.latency_s:
                        time.sleep(self.latency_s)
                    self._hold(data.split(b"\r\n", 1)[0].decode("latin-1")[:200])
                    if fault == "reset":  # the previous response ended inside the budget
                        self._reset(client)
                        return
                    if self.per_request or not decided_for_connection:
                        fault, budget = self._decide()
                        decided_for_connection = True
                        stall_until = time.monotonic() + self.stall_s
                    if fault == "throttle":
                        head = data.startswith(b"HEAD ")
                        client.sendall(
                            b"HTTP/1.1 503 Slow Down\r\nContent-Type: application/xml\r\n"
                            + f"Content-Length: {len(_SLOW_DOWN_BODY)}\r\nConnection: close\r\n\r\n".encode()
                            + (b"" if head else _SLOW_DOWN_BODY)
                        )
                        return
                upstream.sendall(data)
            if upstream in readable and fault != "stall":
                data = upstream.recv(65536)
                if not data:
                    return
                answered = True
                if fault == "reset":
                    if len(data) > budget:  # at least one byte of this response is lost
                        client.sendall(data[:budget])
                        self._reset(client)
                        return
                    budget -= len(data)
                client.sendall(data)

    def _reset(self, client: socket.socket) -> None:
        client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        client.close()  # with linger 0: RST, not FIN
        self._count_reset()


# -- fixture ---------------------------------------------------------------------------------
@dataclass
class FaultyS3:
    """A fault proxy in front of the test S3 server, and s3fs options that go through it."""

    proxy: FaultProxy
    storage_options: dict

    @property
    def counters(self) -> FaultCounters:
        return self.proxy.counters


@pytest.fixture
def faulty_s3(s3_server):
    """Factory: ``faulty_s3(reset_probability=0.3, stall_probability=0, throttle_probability=0, seed=0,
    read_timeout=1, **proxy)``.

    Returns a ``FaultyS3``; its ``storage_options`` reach the same moto server (and buckets) as
    ``s3_server.storage_options``, with botocore's read timeout set to ``read_timeout`` seconds
    so stalls cost little. Proxies close at teardown. Needs ``s3_server`` imported as well::

        from tests.s3_server import s3_server, s3_bucket  # noqa: F401
        from tests.fault_proxy import faulty_s3  # noqa: F401
    """
    from urllib.parse import urlparse

    target = urlparse(s3_server.endpoint_url)
    proxies: list[FaultProxy] = []

    def start(
        *,
        reset_probability: float = 0.3,
        stall_probability: float = 0.0,
        throttle_probability: float = 0.0,
        seed: int = 0,
        read_timeout: float = 1.0,
        **proxy_options,
    ) -> FaultyS3:
        proxy = FaultProxy(
            target.hostname,
            target.port,
            reset_probability=reset_probability,
            stall_probability=stall_probability,
            throttle_probability=throttle_probability,
            seed=seed,
            **proxy_options,
        )
        proxy.__enter__()
        proxies.append(proxy)
        return FaultyS3(proxy, s3_server.storage_options(proxy.url, read_timeout=read_timeout))

    yield start
    for proxy in proxies:
        proxy.close()
