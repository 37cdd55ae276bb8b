"""The driver's key service: how executor tasks get subject keys during the single write pass.

The pipelines seal and open records inside the same executor task that writes them transactionally
(the rows are in Python for the exactly-once sink anyway, and OpenSSL's AES-GCM there is faster per
record than Spark's ``aes_encrypt``). The keys, though, are managed on the driver: one
:class:`~strongroom.keys.manager.KeyManager` / key table per pipeline, race-free creation, erasure
markers, the post-erasure policy, the KMS. Each task asks the driver for the keys of the subjects
(or key ids) in its Arrow batch, in one request per batch.

The channel is TLS with a certificate generated for this service and pinned by the clients (they get
its PEM in the task closure), plus a random token checked on every request; nothing is accepted from
anyone else. It listens on the driver host Spark already uses (``spark.driver.host``), like Spark's own
driver endpoints. Frames are ``u32be length ‖ JSON``; bytes travel as base64.
"""

from __future__ import annotations

import base64
import contextlib
import datetime as dt
import hmac
import json
import logging
import secrets
import socket
import socketserver
import ssl
import struct
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

from strongroom.errors import PipelineError, StrongroomError

log = logging.getLogger(__name__)

_LEN = struct.Struct(">I")
MAX_FRAME = 256 * 1024 * 1024

Handler = Callable[[str, dict[str, Any]], Any]


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def unb64(text: str) -> bytes:
    return base64.b64decode(text)


def _send(sock: Any, payload: Any) -> None:
    data = json.dumps(payload, separators=(",", ":")).encode("utf-8")
    sock.sendall(_LEN.pack(len(data)) + data)


def _recv_exact(sock: Any, size: int) -> bytes:
    chunks, remaining = [], size
    while remaining:
        chunk = sock.recv(min(remaining, 1 << 20))
        if not chunk:
            raise ConnectionError("connection closed")
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)


def _recv(sock: Any) -> Any:
    (size,) = _LEN.unpack(_recv_exact(sock, _LEN.size))
    if size > MAX_FRAME:
        raise ConnectionError(f"frame of {size} bytes is larger than allowed")
    return json.loads(_recv_exact(sock, size))


def _self_signed(host: str) -> tuple[bytes, bytes]:
    """A fresh EC P-256 key and a self-signed certificate for ``host`` (PEM)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "strongroom-key-service")])
    now = dt.datetime.now(dt.UTC)
    try:
        import ipaddress

        alt: x509.GeneralName = x509.IPAddress(ipaddress.ip_address(host))
    except ValueError:
        alt = x509.DNSName(host)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=30))
        .add_extension(x509.SubjectAlternativeName([alt]), critical=False)
        .sign(key, hashes.SHA256())
    )
    key_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    return cert.public_bytes(serialization.Encoding.PEM), key_pem


class _Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True


class KeyService:
    """A TLS request/response server on the driver; ``handler(op, args)`` answers each request."""

    def __init__(self, handler: Handler, *, host: str = "127.0.0.1") -> None:
        self.handler = handler
        self.host = host
        self.token = secrets.token_hex(32)
        self.cert_pem, key_pem = _self_signed(host)
        self._dir = tempfile.TemporaryDirectory(prefix="strongroom-keyservice-")
        cert_file, key_file = Path(self._dir.name) / "cert.pem", Path(self._dir.name) / "key.pem"
        cert_file.write_bytes(self.cert_pem)
        key_file.touch(mode=0o600)
        key_file.write_bytes(key_pem)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        context.load_cert_chain(cert_file, key_file)
        key_file.unlink()  # loaded: the private key never stays on disk
        service = self

        class RequestHandler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                try:
                    conn = context.wrap_socket(self.request, server_side=True)
                except (ssl.SSLError, OSError):
                    return
                with conn:
                    service._serve(conn)

        self._server = _Server((host, 0), RequestHandler)
        self.port: int = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, name="strongroom-keyservice", daemon=True)
        self._thread.start()

    @property
    def address(self) -> tuple[str, int]:
        return (self.host, self.port)

    def client_spec(self) -> dict[str, Any]:
        """What an executor needs to call this service (goes into the task closure)."""
        return {"host": self.host, "port": self.port, "token": self.token, "cert": self.cert_pem.decode("ascii")}

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._dir.cleanup()

    def _serve(self, conn: Any) -> None:
        while True:
            try:
                request = _recv(conn)
            except (ConnectionError, OSError, ValueError):
                return
            if not isinstance(request, dict) or not hmac.compare_digest(str(request.get("token", "")), self.token):
                _send(conn, {"ok": False, "error": {"problem": "unauthenticated request", "hint": ""}})
                return
            try:
                result = self.handler(str(request.get("op")), request.get("args") or {})
                _send(conn, {"ok": True, "result": result})
            except StrongroomError as exc:
                _send(conn, {"ok": False, "error": {"problem": exc.problem, "hint": exc.hint}})
            except Exception as exc:
                log.exception("key service request %r failed", request.get("op"))
                _send(conn, {"ok": False, "error": {"problem": f"{type(exc).__name__}: {exc}", "hint": ""}})


class KeyServiceClient:
    """The executor side: one TLS connection per process and service, reused across tasks."""

    _connections: ClassVar[dict[tuple[str, int, str], Any]] = {}
    _lock: ClassVar[threading.RLock] = threading.RLock()

    def __init__(self, spec: dict[str, Any], *, timeout: float = 3600.0) -> None:
        self.spec = spec
        self.timeout = timeout

    def call(self, op: str, **args: Any) -> Any:
        request = {"token": self.spec["token"], "op": op, "args": args}
        for attempt in (1, 2):  # a connection the driver closed (restarted query) is reopened once
            try:
                with self._lock:  # one request at a time per connection
                    conn = self._connection()
                    _send(conn, request)
                    response = _recv(conn)
                break
            except (ConnectionError, OSError) as exc:
                self._drop()
                if attempt == 2:
                    raise PipelineError(
                        f"cannot reach the driver's key service at {self.spec['host']}:{self.spec['port']}: {exc}",
                        hint="executors must reach the driver host (as for Spark's own driver endpoints)",
                    ) from None
        if not response.get("ok"):
            error = response.get("error") or {}
            raise PipelineError(str(error.get("problem")), hint=str(error.get("hint") or "see the driver log"))
        return response["result"]

    def _key(self) -> tuple[str, int, str]:
        return (self.spec["host"], int(self.spec["port"]), self.spec["token"])

    def _connection(self) -> Any:
        key = self._key()
        conn = self._connections.get(key)
        if conn is None:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
            context.minimum_version = ssl.TLSVersion.TLSv1_2
            context.load_verify_locations(cadata=self.spec["cert"])  # pinned: only this service's cert
            raw = socket.create_connection((key[0], key[1]), timeout=30)
            raw.settimeout(self.timeout)
            conn = context.wrap_socket(raw, server_hostname=key[0])
            self._connections[key] = conn
        return conn

    def _drop(self) -> None:
        with self._lock:
            conn = self._connections.pop(self._key(), None)
        if conn is not None:
            with contextlib.suppress(OSError):
                conn.close()
