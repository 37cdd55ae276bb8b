"""A small client for the Confluent schema-registry REST API (Confluent, Apicurio's ``/apis/ccompat/v7``).

It reads schemas only: by id (what a record names) and by subject + version (a schema's references).
Every answer is cached for the life of the client (a schema id never changes its schema), so the hot
path asks the registry once per schema id.

An unreachable registry (connection refused, timeout, HTTP 5xx) is waited out like a KMS outage: retried
with exponential backoff and jitter, a warning naming the registry at each attempt, and after
``outage_wait_s`` :class:`RegistryUnavailable`. A schema is never guessed. A 404 is
:class:`UnknownSchemaId` (a record problem, never retried); 401/403 is :class:`RegistryRefused`.
Credentials (basic auth, bearer token) are sent as headers and appear in no message or log line.
"""

from __future__ import annotations

import base64
import json
import logging
import random
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, SecretStr, model_validator

from strongroom.schemas.errors import (
    RegistryRefused,
    RegistryUnavailable,
    SchemaRegistryError,
    UnknownSchemaId,
    UnsupportedSchema,
)

log = logging.getLogger(__name__)

_BACKOFF_START: Final = 0.25
_BACKOFF_MAX: Final = 5.0
_NOT_FOUND_CODES: Final = {40401, 40402, 40403}

SchemaType = Literal["AVRO", "JSON", "PROTOBUF"]


class RegistrySettings(BaseModel):
    """Where the registry is and how to authenticate (at most one of basic auth and a bearer token)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    url: str
    username: str | None = None
    password: SecretStr | None = None
    bearer_token: SecretStr | None = None
    timeout_s: float = 10.0
    #: How long an unreachable registry is waited for before :class:`RegistryUnavailable`.
    outage_wait_s: float = 60.0

    @model_validator(mode="after")
    def _check(self) -> RegistrySettings:
        try:
            parts = urllib.parse.urlsplit(self.url)
            parts.port  # noqa: B018 - read for its check: a port out of range or not a number raises
        except ValueError as exc:
            raise ValueError(f"schema registry URL is not a valid URL ({exc})") from None
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"schema registry URL {_display(self.url)!r} must be http(s)://host[:port][/path]")
        if parts.username or parts.password:
            raise ValueError("put registry credentials in username/password, not in the URL")
        if (self.username is None) != (self.password is None):
            raise ValueError("registry basic auth needs both username and password")
        if self.username is not None and self.bearer_token is not None:
            raise ValueError("give the registry basic auth or a bearer token, not both")
        return self


def _display(url: str) -> str:
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or ""
    return f"{parts.scheme}://{host}{f':{parts.port}' if parts.port else ''}{parts.path}"


@dataclass(frozen=True)
class Reference:
    name: str
    subject: str
    version: int


@dataclass(frozen=True)
class RegisteredSchema:
    schema_type: SchemaType
    text: str
    references: tuple[Reference, ...] = ()


class SchemaRegistry:
    """Read-only, caching registry client; thread-safe (the cache is shared, requests are not serialised)."""

    def __init__(
        self,
        settings: RegistrySettings | str,
        *,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.settings = settings if isinstance(settings, RegistrySettings) else RegistrySettings(url=settings)
        self.url = self.settings.url.rstrip("/")
        self.display_url = _display(self.url)
        self._sleep = sleep
        self._clock = clock
        self._by_id: dict[int, RegisteredSchema] = {}
        self._by_version: dict[tuple[str, int], RegisteredSchema] = {}
        self._lock = threading.Lock()
        self.requests = 0

    def preload(self, schema_id: int, schema: RegisteredSchema) -> None:
        """Know ``schema_id`` without asking (schemas shipped with an offline tool, unit tests)."""
        with self._lock:
            self._by_id[schema_id] = schema

    def schema(self, schema_id: int) -> RegisteredSchema:
        """The schema a record's id names (cached)."""
        cached = self._by_id.get(schema_id)
        if cached is not None:
            return cached
        body = self._get(f"/schemas/ids/{schema_id}", f"schema id {schema_id}")
        schema = _registered(body, f"schema id {schema_id}")
        with self._lock:
            self._by_id[schema_id] = schema
        return schema

    def version(self, subject: str, version: int) -> RegisteredSchema:
        """A referenced schema, by subject and version (cached)."""
        cached = self._by_version.get((subject, version))
        if cached is not None:
            return cached
        path = f"/subjects/{urllib.parse.quote(subject, safe='')}/versions/{version}"
        schema = _registered(self._get(path, f"subject {subject!r} version {version}"), f"subject {subject!r}")
        with self._lock:
            self._by_version[(subject, version)] = schema
        return schema

    # ------------------------------------------------------------------ HTTP
    def _request(self, path: str) -> urllib.request.Request:
        req = urllib.request.Request(self.url + path, headers={"Accept": "application/json"})  # noqa: S310
        settings = self.settings
        if settings.username is not None and settings.password is not None:
            raw = f"{settings.username}:{settings.password.get_secret_value()}".encode()
            req.add_header("Authorization", "Basic " + base64.b64encode(raw).decode("ascii"))
        elif settings.bearer_token is not None:
            req.add_header("Authorization", "Bearer " + settings.bearer_token.get_secret_value())
        return req

    def _get(self, path: str, what: str) -> dict[str, Any]:
        """GET ``path`` as JSON, waiting out an outage; raises the precise error for everything else."""
        started = self._clock()
        attempt = 0
        while True:
            problem = self._try_get(path, what)
            if not isinstance(problem, str):
                return problem
            waited = self._clock() - started
            if waited >= self.settings.outage_wait_s:
                raise RegistryUnavailable(
                    f"schema registry {self.display_url} unreachable for {waited:.0f}s while reading {what}: {problem}"
                )
            delay = min(_BACKOFF_MAX, _BACKOFF_START * 2**attempt) * (0.5 + random.random() / 2)
            delay = min(delay, max(0.0, self.settings.outage_wait_s - waited))
            attempt += 1
            log.warning(
                "schema registry %s unreachable (%s); waiting %.1fs before retrying (gives up after %.0fs)",
                self.display_url, problem, delay, self.settings.outage_wait_s,
            )  # fmt: skip
            self._sleep(delay)

    def _try_get(self, path: str, what: str) -> dict[str, Any] | str:
        """The JSON answer, or a string saying why the registry is unavailable (to be retried)."""
        self.requests += 1
        try:
            with urllib.request.urlopen(self._request(path), timeout=self.settings.timeout_s) as resp:  # noqa: S310
                raw = resp.read()
        except urllib.error.HTTPError as exc:
            return self._http_error(exc, what)
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            return f"{type(reason).__name__}: {reason}"
        try:
            body = json.loads(raw)
        except (ValueError, RecursionError):
            raise SchemaRegistryError(
                f"schema registry {self.display_url} answered {what} with something that is not JSON",
                hint="check that the URL points at the Confluent-compatible API (Apicurio: /apis/ccompat/v7)",
            ) from None
        if not isinstance(body, dict):
            raise SchemaRegistryError(f"schema registry {self.display_url} answered {what} with a non-object")
        return body

    def _http_error(self, exc: urllib.error.HTTPError, what: str) -> str:
        try:
            detail = json.loads(exc.read() or b"{}")
        except (ValueError, RecursionError):
            detail = {}
        code = detail.get("error_code") if isinstance(detail, dict) else None
        if exc.code >= 500:
            return f"HTTP {exc.code}"
        if exc.code == 404 and (code in _NOT_FOUND_CODES or code is None):
            raise UnknownSchemaId(f"schema registry {self.display_url} does not know {what} (HTTP 404, code {code})")
        if exc.code in (401, 403):
            raise RegistryRefused(
                f"schema registry {self.display_url} refused the request for {what} (HTTP {exc.code})"
            )
        raise SchemaRegistryError(f"schema registry {self.display_url} answered {what} with HTTP {exc.code} ({code})")


def _registered(body: dict[str, Any], what: str) -> RegisteredSchema:
    schema_type = body.get("schemaType", "AVRO")
    text = body.get("schema")
    if schema_type not in ("AVRO", "JSON", "PROTOBUF") or not isinstance(text, str):
        raise UnsupportedSchema(f"{what} is of schema type {schema_type!r}; strongroom reads AVRO, JSON and PROTOBUF")
    refs = tuple(Reference(str(r["name"]), str(r["subject"]), int(r["version"])) for r in body.get("references") or ())
    return RegisteredSchema(schema_type, text, refs)
