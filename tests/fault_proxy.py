"""A TCP proxy on 127.0.0.1 that injects connection faults between a client and a server.

Per accepted connection, with the configured probabilities (deterministic for a seed): pass
through, reset the connection (RST via SO_LINGER 0) after forwarding some response bytes,
or stall (stop forwarding, hold the socket open) so the client's read timeout fires.
"""

from __future__ import annotations

import random
import socket
import struct
import threading
from dataclasses import dataclass, field


@dataclass
class FaultCounters:
    connections: int = 0
    resets: int = 0
    stalls: int = 0


@dataclass
class FaultProxy:
    target_host: str
    target_port: int
    reset_probability: float = 0.0
    stall_probability: float = 0.0
    seed: int = 0
    counters: FaultCounters = field(default_factory=FaultCounters)

    def __post_init__(self) -> None:
        self._rng = random.Random(self.seed)
        self._lock = threading.Lock()
        self._listener = socket.socket()
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(64)
        self.port = self._listener.getsockname()[1]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._accept, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> FaultProxy:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._listener.close()

    def _decide(self) -> str:
        with self._lock:
            self.counters.connections += 1
            draw = self._rng.random()
            if draw < self.reset_probability:
                self.counters.resets += 1
                return "reset"
            if draw < self.reset_probability + self.stall_probability:
                self.counters.stalls += 1
                return "stall"
            return "pass"

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(client, self._decide()), daemon=True).start()

    def _serve(self, client: socket.socket, mode: str) -> None:
        try:
            upstream = socket.create_connection((self.target_host, self.target_port), timeout=30)
        except OSError:
            client.close()
            return
        if mode == "stall":
            self._stop.wait(60)  # hold both sockets open and silent
            client.close()
            upstream.close()
            return
        budget = [self._rng.randint(0, 2000)] if mode == "reset" else [None]
        done = threading.Event()

        def pump(source: socket.socket, sink: socket.socket, limited: bool) -> None:
            try:
                while not done.is_set():
                    data = source.recv(65536)
                    if not data:
                        break
                    if limited and budget[0] is not None:
                        if len(data) >= budget[0]:
                            sink.sendall(data[: budget[0]])
                            client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                            break
                        budget[0] -= len(data)
                    sink.sendall(data)
            except OSError:
                pass
            finally:
                done.set()
                for sock in (client, upstream):
                    try:
                        sock.close()
                    except OSError:
                        pass

        threading.Thread(target=pump, args=(client, upstream, False), daemon=True).start()
        pump(upstream, client, True)
