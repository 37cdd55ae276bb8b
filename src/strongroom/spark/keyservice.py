"""The driver's key service: how executor tasks get subject keys during the single write pass.

The pipelines seal and open records inside the same executor task that writes them transactionally.
The keys, though, are managed on the driver: one :class:`~strongroom.keys.manager.KeyManager` / key
table per pipeline, race-free creation, erasure markers, the post-erasure policy, the KMS. Each task
asks the driver for the keys of the subjects (or key ids) in its Arrow batch, in one request per batch.

The protocol (docs/pipelines.md, "The key service"; a Java client will speak it too):

* TLS 1.2+ with a certificate generated for this service and pinned by the clients (they get its PEM
  in the task closure); it listens on the driver host Spark already uses (``spark.driver.host``).
* Every message is a frame: ``u32 big-endian length ‖ body``.
* First, within :attr:`KeyService.auth_timeout_s` of connecting (TLS handshake included), the client
  sends an **authentication frame** whose body is the token, 64 ASCII hex characters (at most
  :data:`MAX_AUTH_FRAME` bytes). The server answers ``{"ok": true}``, or an error and closes. Nothing
  larger is read from a connection before its token matched (constant-time compare).
* Then **request frames**, JSON ``{"op": str, "args": {...}, "erasure_generation": int | null}`` of at
  most :data:`MAX_REQUEST_FRAME` bytes, each answered by ``{"ok": true, "result": ..., "erasures":
  {"generation": int, "key_ids": [base64...], "reset": bool}}`` or ``{"ok": false, "error": {"problem",
  "hint"}}``. Bytes travel as base64. An authenticated connection is closed after
  :attr:`KeyService.idle_timeout_s` without a request.
* ``encrypt_keys`` takes ``{"subjects": [str...], "seals": [int...]}``: ``seals`` (added with the
  subject-key usage limits; optional, so older clients keep working) says how many seals each subject's
  key makes in the batch, aligned with ``subjects``: one per record sealed whole, one per sealed value in
  field and schema mode. The driver charges them to the keys' usage
  limits (:mod:`strongroom.keys.usage`) and may answer a subject's *new* key (rotation). A client that
  sends no ``seals`` is charged one seal per subject per request — an undercount when a batch holds
  several records of a subject, so every client should send it.
* ``"packed": true`` in the args of ``encrypt_keys`` or ``decrypt_keys`` (the JVM engine's client sends it) asks
  for a compact answer without a JSON value per key: ``encrypt_keys`` answers ``{"keys": base64}`` holding, for
  each asked subject in request order, ``flag(1) ‖ key id(16) ‖ DEK(32)`` (flag 1: seal with this key; 0: the
  post-erasure policy drops the record, key id and DEK are zeros); ``decrypt_keys`` answers ``{"states":
  base64, "deks": base64, "reasons": {index: reason}}``: one state code per asked pair (:data:`KEY_STATE_CODES`),
  the 32-byte DEK of every available pair in order, and the reason of the pairs that have one. Without it the
  answers are the JSON ones above (the Python engine's client).
* ``erasures`` (when the service follows a key table's :class:`~strongroom.keys.erasure_feed.ErasureFeed`)
  lists the key ids the driver's key table erased after the ``erasure_generation`` the request names
  (taken *before* the request is answered, so a key erased while it is answered comes with the next
  answer), or ``reset`` when they cannot be listed. The client applies it to the executor's keys
  (:mod:`strongroom.spark.executor_keys`) before it returns the result: erased keys are gone from the
  executor before it seals or opens the batch.
* At most :attr:`KeyService.max_connections` connections at once; more are closed on arrival.
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
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar, Final

from strongroom.errors import PipelineError, StrongroomError
from strongroom.keys.erasure_feed import ErasureFeed
from strongroom.spark.executor_keys import EXECUTOR_KEYS, service_id

log = logging.getLogger(__name__)

_LEN = struct.Struct(">I")
#: Largest authentication frame the server reads (the token is 64 ASCII characters).
MAX_AUTH_FRAME = 256
#: Largest request frame (an Arrow batch's subjects or key ids: tens of thousands of short strings).
MAX_REQUEST_FRAME = 64 * 1024 * 1024
#: Largest response frame a client accepts (keys for every subject of a batch).
MAX_RESPONSE_FRAME = 256 * 1024 * 1024


class FrameTooLarge(ConnectionError):
    pass


Handler = Callable[[str, dict[str, Any]], Any]


#: ``decrypt_keys`` packed: the code of each key state (``strongroom.spark.transforms``'s ``KEY_*`` names).
KEY_STATE_CODES: Final = {"available": 1, "erased": 2, "pending": 3, "lost": 4, "foreign": 5}
_NO_KEY: Final = bytes(1 + 16 + 32)


def packed_encrypt_answer(subjects: Sequence[str], keys: Mapping[str, tuple[bytes, bytes, bool]]) -> dict[str, str]:
    """``encrypt_keys``'s packed answer: ``keys[subject]`` is ``(key id, DEK, emit)`` for every asked subject."""
    parts: list[bytes] = []
    for subject in subjects:
        key_id, dek, emit = keys[subject]
        if not emit:
            parts.append(_NO_KEY)
        elif len(key_id) != 16 or len(dek) != 32:
            raise PipelineError(f"a subject key of {len(key_id)}-byte id and {len(dek)} bytes cannot be packed")
        else:
            parts += (b"\x01", key_id, dek)
    return {"keys": b64(b"".join(parts))}


def packed_decrypt_answer(rows: Sequence[tuple[bytes, bytes | None, str, str | None]]) -> dict[str, Any]:
    """``decrypt_keys``'s packed answer from its ``(key id, DEK or None, state, reason or None)`` rows, in order."""
    codes = bytearray(len(rows))
    deks: list[bytes] = []
    reasons: dict[str, str] = {}
    for index, (_, dek, state, reason) in enumerate(rows):
        codes[index] = KEY_STATE_CODES[state]
        if state == "available" and dek is not None:
            if len(dek) != 32:
                raise PipelineError(f"a subject key of {len(dek)} bytes cannot be packed")
            deks.append(dek)
        elif state == "available":
            codes[index] = KEY_STATE_CODES["pending"]  # what an available state without a key means to a reader
        if reason is not None:
            reasons[str(index)] = reason
    return {"states": b64(bytes(codes)), "deks": b64(b"".join(deks)), "reasons": reasons}


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def unb64(text: str) -> bytes:
    return base64.b64decode(text)


def _send(sock: Any, payload: Any) -> None:
    _send_frame(sock, json.dumps(payload, separators=(",", ":")).encode("utf-8"))


def _send_frame(sock: Any, body: bytes) -> None:
    sock.sendall(_LEN.pack(len(body)) + body)


def _recv_exact(sock: Any, size: int) -> bytes:
    chunks, remaining = [], size
    while remaining:
        chunk = sock.recv(min(remaining, 1 << 20))
        if not chunk:
            raise ConnectionError("connection closed")
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)


def _recv_frame(sock: Any, limit: int) -> bytes:
    (size,) = _LEN.unpack(_recv_exact(sock, _LEN.size))
    if size > limit:
        raise FrameTooLarge(f"frame of {size} bytes is larger than the {limit} allowed")
    return _recv_exact(sock, size)


def _recv(sock: Any, limit: int = MAX_RESPONSE_FRAME) -> Any:
    return json.loads(_recv_frame(sock, limit))


def _error(problem: str, hint: str = "") -> dict[str, Any]:
    return {"ok": False, "error": {"problem": problem, "hint": hint}}


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

    def __init__(
        self,
        handler: Handler,
        *,
        host: str = "127.0.0.1",
        auth_timeout_s: float = 10.0,
        idle_timeout_s: float = 900.0,
        max_connections: int = 128,
        erasures: ErasureFeed | None = None,
    ) -> None:
        self.handler = handler
        self.erasures = erasures
        self.host = host
        self.token = secrets.token_hex(32)
        self.auth_timeout_s = auth_timeout_s
        self.idle_timeout_s = idle_timeout_s
        self.max_connections = max_connections
        self._slots = threading.BoundedSemaphore(max_connections)
        self.cert_pem, key_pem = _self_signed(host)
        context = _server_context(self.cert_pem, key_pem)
        service = self

        class RequestHandler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                service._handle(self.request, context)

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

    def _handle(self, raw: socket.socket, context: ssl.SSLContext) -> None:
        """One connection: at most ``max_connections`` at once; TLS and the token within the auth timeout."""
        if not self._slots.acquire(blocking=False):
            log.warning("key service: refusing a connection from %s (%d open)", raw.getpeername()[0],
                        self.max_connections)  # fmt: skip
            return
        try:
            raw.settimeout(self.auth_timeout_s)
            try:
                conn = context.wrap_socket(raw, server_side=True)
            except (ssl.SSLError, OSError):
                return
            with conn:
                if self._authenticated(conn):
                    conn.settimeout(self.idle_timeout_s)
                    self._serve(conn)
        finally:
            self._slots.release()

    def _authenticated(self, conn: Any) -> bool:
        """Read the authentication frame (small, within the auth timeout) and check the token."""
        try:
            body = _recv_frame(conn, MAX_AUTH_FRAME)
        except FrameTooLarge as exc:
            self._refuse(conn, f"authentication frame refused: {exc}")
            return False
        except (ConnectionError, OSError):
            return False
        try:
            token = body.decode("ascii")
        except UnicodeDecodeError:
            self._refuse(conn, "authentication refused: the token is not ASCII")
            return False
        if not hmac.compare_digest(token.encode("ascii"), self.token.encode("ascii")):
            self._refuse(conn, "unauthenticated request")
            return False
        _send(conn, {"ok": True})
        return True

    @staticmethod
    def _refuse(conn: Any, problem: str) -> None:
        with contextlib.suppress(OSError):
            _send(conn, _error(problem, "the executor must use the token its task was given"))

    def _serve(self, conn: Any) -> None:
        while True:
            try:
                request = json.loads(_recv_frame(conn, MAX_REQUEST_FRAME))
            except FrameTooLarge as exc:
                self._refuse(conn, f"request refused: {exc}")
                return
            except (ConnectionError, OSError, ValueError):
                return
            if not isinstance(request, dict):
                self._refuse(conn, "a request is a JSON object")
                return
            op, args = str(request.get("op")), request.get("args") or {}
            try:
                erasures = self._erasures_since(request.get("erasure_generation"))  # before the answer: see above
                result = self.handler(op, args if isinstance(args, dict) else {})
                _send(conn, {"ok": True, "result": result, "erasures": erasures})
            except StrongroomError as exc:
                _send(conn, _error(exc.problem, exc.hint))
            except OSError:
                return
            except Exception as exc:
                log.exception("key service request %r failed", op)
                _send(conn, _error(f"{type(exc).__name__}: {exc}"))

    def _erasures_since(self, generation: object) -> dict[str, Any] | None:
        if self.erasures is None:
            return None
        known = generation if isinstance(generation, int) and not isinstance(generation, bool) else None
        delta = self.erasures.since(known)
        return {"generation": delta.generation, "key_ids": [b64(k) for k in delta.key_ids], "reset": delta.reset}


def _server_context(cert_pem: bytes, key_pem: bytes) -> ssl.SSLContext:
    """The server's TLS context; the private key is on disk (mode 0600) only while it is loaded."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    with tempfile.TemporaryDirectory(prefix="strongroom-keyservice-") as directory:
        cert_file, key_file = Path(directory) / "cert.pem", Path(directory) / "key.pem"
        cert_file.write_bytes(cert_pem)
        key_file.touch(mode=0o600)
        key_file.write_bytes(key_pem)
        context.load_cert_chain(cert_file, key_file)
    return context


class KeyServiceClient:
    """The executor side: one TLS connection per process and service, reused across tasks."""

    _connections: ClassVar[dict[tuple[str, int, str], Any]] = {}
    _lock: ClassVar[threading.RLock] = threading.RLock()

    def __init__(self, spec: dict[str, Any], *, timeout: float = 3600.0) -> None:
        self.spec = spec
        self.timeout = timeout

    @property
    def service_id(self) -> str:
        return service_id(self.spec["host"], int(self.spec["port"]), str(self.spec["token"]))

    def call(self, op: str, **args: Any) -> Any:
        """One request; the answer's erasures are applied to this process's keys before it returns."""
        service = self.service_id
        request = {"op": op, "args": args, "erasure_generation": EXECUTOR_KEYS.generation(service)}
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
        erasures = response.get("erasures")
        if isinstance(erasures, dict):
            erased = [unb64(k) for k in erasures.get("key_ids") or []]
            EXECUTOR_KEYS.follow(service, int(erasures["generation"]), erased, bool(erasures.get("reset")))
        return response["result"]

    def remember(self, keys: list[tuple[bytes, bytes]]) -> None:
        """Note the keys this service handed out, so a later erasure can drop them from this process."""
        EXECUTOR_KEYS.remember(self.service_id, keys)

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
            conn = context.wrap_socket(raw, server_hostname=key[0])
            _send_frame(conn, str(key[2]).encode("ascii"))  # authenticate first, then requests
            answer = _recv(conn, MAX_AUTH_FRAME * 4)
            if not answer.get("ok"):
                conn.close()
                error = answer.get("error") or {}
                raise PipelineError(str(error.get("problem")), hint=str(error.get("hint") or "see the driver log"))
            conn.settimeout(self.timeout)
            self._connections[key] = conn
        return conn

    def _drop(self) -> None:
        with self._lock:
            conn = self._connections.pop(self._key(), None)
        if conn is not None:
            with contextlib.suppress(OSError):
                conn.close()


#: Spark settings that authenticate and encrypt the channel task closures travel on (they carry the token).
SECURE_CHANNEL_SETTINGS = ("spark.authenticate", "spark.network.crypto.enabled")


def channel_problem(master: str, conf: Mapping[str, str]) -> str | None:
    """Why Spark's own driver-executor channel is not safe for the key service token (and, for the
    DataFrame API, for keys in broadcasts); None when it is (local mode, or both settings on)."""
    from strongroom.spark.session import is_local_master

    if is_local_master(master):
        return None
    missing = [name for name in SECURE_CHANNEL_SETTINGS if str(conf.get(name, "false")).lower() != "true"]
    if not missing:
        return None
    return (
        f"the Spark master {master} runs executors on other machines, and {' and '.join(missing)} "
        f"{'is' if len(missing) == 1 else 'are'} not set to true: task closures (with the key service's token) "
        "and broadcasts would cross the network unauthenticated and in clear"
    )


def require_secure_channel(spark: Any, *, allow_unencrypted: bool = False) -> None:
    """Refuse to hand out keys over an unprotected cluster channel, unless explicitly allowed."""
    context = spark.sparkContext
    problem = channel_problem(context.master, dict(context.getConf().getAll()))
    if problem is None:
        return
    if allow_unencrypted:
        log.warning("%s (allowed by --allow-unencrypted-spark-channel)", problem)
        return
    raise PipelineError(
        problem,
        hint="submit with --conf spark.authenticate=true --conf spark.network.crypto.enabled=true (and a secret, "
        "see docs/pipelines.md), or pass --allow-unencrypted-spark-channel if the network is protected otherwise",
    )
