"""A real flaky endpoint for fault-injection tests: a loopback port that refuses connections until
:meth:`TcpForwarder.start`, then pipes every connection to ``target_port`` (a KMS or broker that is
down and comes back, without mocking the client)."""

from __future__ import annotations

import contextlib
import socket
import threading

from strongroom.testing.process import free_port


class TcpForwarder:
    """Before :meth:`start` the port refuses connections; afterwards each one is piped to ``target_port``."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.port = free_port()
        self._server: socket.socket | None = None
        self._stop = threading.Event()

    def start(self) -> None:
        server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        server.bind(("127.0.0.1", self.port))
        server.listen(16)
        server.settimeout(0.2)
        self._server = server
        threading.Thread(target=self._accept, daemon=True).start()

    def start_after(self, seconds: float) -> None:
        threading.Timer(seconds, self.start).start()

    def _accept(self) -> None:
        assert self._server is not None
        while not self._stop.is_set():
            try:
                client, _ = self._server.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self.target_port))
            for source, sink in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(source, sink), daemon=True).start()

    @staticmethod
    def _pipe(source: socket.socket, sink: socket.socket) -> None:
        try:
            while chunk := source.recv(65536):
                sink.sendall(chunk)
        except OSError:
            pass
        finally:
            for sock in (source, sink):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)

    def stop(self) -> None:
        self._stop.set()
        if self._server is not None:
            self._server.close()
