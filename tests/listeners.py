"""Loopback HTTP listeners for the hostile suites: raw sockets on 127.0.0.1 that record every request's path and
headers and answer through a handler the test chooses (a normal reply, a slow drip, a redirect). Nothing but
127.0.0.1 is ever bound or contacted."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field


@dataclass
class Seen:
    path: str
    headers: dict[str, str]


Handler = Callable[["Listener", str, socket.socket], None]


@dataclass
class Listener:
    """An HTTP listener on 127.0.0.1: each request's path and headers are recorded, ``handler`` answers it."""

    handler: Handler
    seen: list[Seen] = field(default_factory=list)
    ended: list[float] = field(default_factory=list)  # time.monotonic() when each answer ended (or the peer left)
    sent: int = 0
    stop: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.sock.settimeout(0.1)
        self.port = self.sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.threads = [threading.Thread(target=self._accept, daemon=True)]
        self.threads[0].start()

    def _accept(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except (TimeoutError, OSError):
                continue
            t = threading.Thread(target=self._serve, args=(conn,), daemon=True)
            self.threads.append(t)
            t.start()

    def _serve(self, conn: socket.socket) -> None:
        with conn:
            conn.settimeout(5)
            data = b""
            with contextlib.suppress(OSError):
                while b"\r\n\r\n" not in data and len(data) < 65536:
                    chunk = conn.recv(4096)
                    if not chunk:
                        return
                    data += chunk
            head = data.split(b"\r\n\r\n", 1)[0].decode("latin-1").split("\r\n")
            path = head[0].split(" ")[1] if len(head[0].split(" ")) > 1 else ""
            headers = {}
            for line in head[1:]:
                name, _, value = line.partition(":")
                headers[name.strip().lower()] = value.strip()
            self.seen.append(Seen(path, headers))
            try:
                with contextlib.suppress(OSError):
                    self.handler(self, path, conn)
            finally:
                self.ended.append(time.monotonic())

    def send(self, conn: socket.socket, data: bytes) -> None:
        conn.sendall(data)
        self.sent += len(data)

    def close(self) -> None:
        self.stop.set()
        self.sock.close()
        for t in self.threads:
            t.join(5)


@contextlib.contextmanager
def listening(handler: Handler) -> Iterator[Listener]:
    lst = Listener(handler)
    try:
        yield lst
    finally:
        lst.close()


def reply(lst: Listener, conn: socket.socket, status: int, body: bytes, extra: str = "") -> None:
    head = f"HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n{extra}"
    lst.send(conn, (head + "Connection: close\r\n\r\n").encode() + body)


def drip(lst: Listener, path: str, conn: socket.socket) -> None:
    """A valid header, then one body byte every 0.5 s, forever."""
    lst.send(conn, b"HTTP/1.1 200 OK\r\nContent-Length: 100000000\r\n\r\n")
    while not lst.stop.is_set():
        lst.send(conn, b"a")
        time.sleep(0.5)


def drip_header(lst: Listener, path: str, conn: socket.socket) -> None:
    """The header itself, one byte every 0.5 s, forever."""
    for byte in iter(lambda: b"X", None):
        if lst.stop.is_set():
            return
        lst.send(conn, byte)
        time.sleep(0.5)
