"""A loopback TCP proxy a test can cut: the database "goes away" for the processes behind it only.

Stopping the shared PostgreSQL server would take it from every test running
beside; pointing a test's processes at this proxy instead lets one test make
an outage of its own. While cut, open connections are closed and new ones
are accepted and closed at once (a refused login, as a dead server gives).
"""

from __future__ import annotations

import contextlib
import selectors
import socket
import threading
from collections.abc import Iterator


class TcpProxy:
    """Forwards 127.0.0.1:``port`` to ``target``; :meth:`cut` and :meth:`restore` the link."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._open: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._cut = threading.Event()
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def cut(self) -> None:
        """Close every connection now and refuse new ones until :meth:`restore`."""
        self._cut.set()
        with self._lock:
            for sock in self._open:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
            self._open.clear()

    def restore(self) -> None:
        """Forward again."""
        self._cut.clear()

    def close(self) -> None:
        """Stop listening and close every connection."""
        self._closed.set()
        self.cut()
        self._listener.close()

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            if self._cut.is_set():
                client.close()
                continue
            try:
                upstream = socket.create_connection(self.target, timeout=5)
            except OSError:
                client.close()
                continue
            with self._lock:
                self._open.update((client, upstream))
            threading.Thread(target=self._pipe, args=(client, upstream), daemon=True).start()

    def _pipe(self, client: socket.socket, upstream: socket.socket) -> None:
        peers = {client: upstream, upstream: client}
        with selectors.DefaultSelector() as selector:
            for sock in peers:
                selector.register(sock, selectors.EVENT_READ)
            while not self._cut.is_set():
                for key, _ in selector.select(timeout=0.2):
                    source: socket.socket = key.fileobj  # type: ignore[assignment]
                    try:
                        data = source.recv(65536)
                    except OSError:
                        data = b""
                    if not data:
                        self._close_pair(peers)
                        return
                    try:
                        peers[source].sendall(data)
                    except OSError:
                        self._close_pair(peers)
                        return
        self._close_pair(peers)

    def _close_pair(self, peers: dict[socket.socket, socket.socket]) -> None:
        with self._lock:
            for sock in peers:
                self._open.discard(sock)
                with contextlib.suppress(OSError):
                    sock.close()


@contextlib.contextmanager
def tcp_proxy(target: tuple[str, int]) -> Iterator[TcpProxy]:
    """A proxy to ``target`` for the block."""
    proxy = TcpProxy(target)
    try:
        yield proxy
    finally:
        proxy.close()
