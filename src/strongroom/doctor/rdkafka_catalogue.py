"""librdkafka's own list of configuration properties, read from the library confluent-kafka ships.

``doctor client`` must tell a misspelled property from a real one, and suggest the right name. A
hand-copied list would drift from the library actually installed, so we ask the library:
``rd_kafka_conf_properties_show()`` prints librdkafka's property table (the one published as
CONFIGURATION.md: name, producer/consumer scope, range, default, aliases) and
``rd_kafka_conf_set()`` validates one name and value exactly as a client constructor would, without
creating a client. Both are called through :mod:`ctypes` on the ``librdkafka`` shared object loaded by
``confluent_kafka`` itself.

If that shared object cannot be found (an unusual build), validation falls back to constructing a
throwaway ``Producer`` with the property - still librdkafka's verdict - and suggestions are not
available; :func:`load_catalogue` then returns ``None``.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import difflib
import functools
import glob
import logging
import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

_ROW = re.compile(r"^([A-Za-z_][A-Za-z0-9._]*)\s*\|\s*([*CP])\s*\|(.*?)\|(.*?)\|(.*?)\|(.*)$")
_ALIAS = re.compile(r"^Alias for `([^`]+)`")


@dataclass(frozen=True)
class PropertyInfo:
    name: str
    #: ``P`` producer only, ``C`` consumer only, ``*`` both.
    scope: str
    #: ``global`` or ``topic`` (topic-level properties can also be set in the global config).
    level: str
    range: str
    default: str
    alias_of: str | None
    deprecated: bool


@dataclass(frozen=True)
class Catalogue:
    """Every property the installed librdkafka knows, with aliases resolved."""

    version: str
    properties: dict[str, PropertyInfo]

    def known(self, name: str) -> bool:
        return name in self.properties

    def canonical(self, name: str) -> str:
        info = self.properties.get(name)
        return info.alias_of if info is not None and info.alias_of else name

    def info(self, name: str) -> PropertyInfo | None:
        return self.properties.get(self.canonical(name))

    def default(self, name: str) -> str | None:
        info = self.info(name)
        return info.default if info is not None and info.default != "" else None

    def suggestions(self, name: str, n: int = 3) -> list[str]:
        """Closest real names: exact after normalising case and separators, else by similarity."""
        normalised = name.strip().lower().replace("_", ".").replace("-", ".")
        if normalised in self.properties:
            return [normalised]
        return difflib.get_close_matches(normalised, list(self.properties), n=n, cutoff=0.75)


@dataclass(frozen=True)
class PropertyCheck:
    """librdkafka's verdict on one ``name=value``: ``ok``, ``unknown`` (no such property), ``invalid``
    or ``unchecked`` (not safe to try, see :data:`UNSAFE_TO_SET`)."""

    status: str
    message: str = ""


def parse_properties_table(text: str) -> dict[str, PropertyInfo]:
    """Parse the CONFIGURATION.md-style table ``rd_kafka_conf_properties_show`` prints."""
    properties: dict[str, PropertyInfo] = {}
    level = "global"
    for line in text.splitlines():
        if line.startswith("## "):
            level = "topic" if "Topic" in line else "global"
            continue
        match = _ROW.match(line)
        if not match:
            continue
        name, scope, range_, default, _importance, description = (g.strip() for g in match.groups())
        alias = _ALIAS.match(description)
        properties.setdefault(
            name,
            PropertyInfo(
                name=name,
                scope=scope,
                level=level,
                range=range_,
                default=default,
                alias_of=alias.group(1) if alias else None,
                deprecated="**DEPRECATED**" in description,
            ),
        )
    return properties


def _library_candidates() -> list[str]:
    import confluent_kafka

    package_dir = Path(confluent_kafka.__file__).resolve().parent
    patterns = [
        str(package_dir.parent / "confluent_kafka.libs" / "librdkafka*.so*"),  # manylinux wheels (auditwheel)
        str(package_dir / ".dylibs" / "librdkafka*.dylib"),  # macOS wheels (delocate)
        str(package_dir.parent / "confluent_kafka.libs" / "librdkafka*.dll"),  # Windows wheels (delvewheel)
    ]
    found = [path for pattern in patterns for path in sorted(glob.glob(pattern))]
    system = ctypes.util.find_library("rdkafka")
    if system:
        found.append(system)
    return found


@functools.cache
def _library() -> ctypes.CDLL | None:
    for path in _library_candidates():
        try:
            lib = ctypes.CDLL(path)
            lib.rd_kafka_version_str.restype = ctypes.c_char_p
            lib.rd_kafka_conf_new.restype = ctypes.c_void_p
            lib.rd_kafka_conf_destroy.argtypes = [ctypes.c_void_p]
            lib.rd_kafka_conf_set.restype = ctypes.c_int
            lib.rd_kafka_conf_set.argtypes = [
                ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_size_t,
            ]  # fmt: skip
            lib.rd_kafka_conf_properties_show.argtypes = [ctypes.c_void_p]
            return lib
        except (OSError, AttributeError) as exc:
            log.debug("cannot use %s as librdkafka: %s", path, exc)
    return None


def _properties_table(lib: ctypes.CDLL) -> str:
    """Have librdkafka print its property table into a temporary file (it writes to a ``FILE *``)."""
    libc = ctypes.CDLL(ctypes.util.find_library("c") or None)
    libc.fopen.restype = ctypes.c_void_p
    libc.fopen.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
    libc.fclose.argtypes = [ctypes.c_void_p]
    fd, path = tempfile.mkstemp(prefix="strongroom-rdkafka-", suffix=".md")
    os.close(fd)
    try:
        fp = libc.fopen(path.encode(), b"w")
        if not fp:
            raise OSError(f"cannot open {path}")
        try:
            lib.rd_kafka_conf_properties_show(fp)
        finally:
            libc.fclose(fp)
        return Path(path).read_text(encoding="utf-8", errors="replace")
    finally:
        os.unlink(path)


@functools.cache
def load_catalogue() -> Catalogue | None:
    """The installed librdkafka's property catalogue, or ``None`` if the library cannot be reached."""
    lib = _library()
    if lib is None or os.name != "posix":
        return None
    try:
        properties = parse_properties_table(_properties_table(lib))
    except OSError as exc:
        log.debug("cannot read librdkafka's property table: %s", exc)
        return None
    if not properties:
        return None
    return Catalogue(version=lib.rd_kafka_version_str().decode(), properties=properties)


#: Setting these makes librdkafka load code (plugins, OpenSSL engines); a linter must not do that for
#: a file it was merely asked to read. They are reported as not validated.
UNSAFE_TO_SET = frozenset({"plugin.library.paths", "ssl.engine.location"})


def check_property(name: str, value: str) -> PropertyCheck:
    """Ask librdkafka whether ``name=value`` is a valid configuration entry."""
    if name in UNSAFE_TO_SET:
        return PropertyCheck("unchecked", f"{name} loads code when set; not validated")
    lib = _library()
    if lib is not None:
        conf = lib.rd_kafka_conf_new()
        try:
            errstr = ctypes.create_string_buffer(512)
            result = lib.rd_kafka_conf_set(conf, name.encode(), value.encode(), errstr, len(errstr))
        finally:
            lib.rd_kafka_conf_destroy(conf)
        message = errstr.value.decode(errors="replace")
        if result == 0:
            return PropertyCheck("ok")
        return PropertyCheck("unknown" if result == -2 else "invalid", message)
    return _check_by_constructing(name, value)


def _check_by_constructing(name: str, value: str) -> PropertyCheck:
    from confluent_kafka import KafkaException

    from strongroom.kafka.transport import build_producer

    try:
        build_producer({name: value, "log_level": 0})
    except KafkaException as exc:
        message = exc.args[0].str() if exc.args and hasattr(exc.args[0], "str") else str(exc)
        status = "unknown" if "No such configuration property" in message else "invalid"
        return PropertyCheck(status, message)
    except (TypeError, ValueError) as exc:
        return PropertyCheck("invalid", str(exc))
    return PropertyCheck("ok")
