"""Where strongroom keeps its own state on this machine.

``$STRONGROOM_HOME`` (default ``~/.strongroom``) holds state that matters: the dev stack's OpenBao
data and local keyring, operation logs. ``$STRONGROOM_CACHE`` (default ``~/.cache/strongroom``) holds
downloads that can be fetched again (Kafka jars).
"""

from __future__ import annotations

import os
from pathlib import Path


def home_dir() -> Path:
    return Path(os.environ.get("STRONGROOM_HOME", Path.home() / ".strongroom"))


def dev_dir() -> Path:
    return home_dir() / "dev"


def cache_dir() -> Path:
    """Downloads and builds that can be made again (Kafka jars, logs of embedded JVMs)."""
    return Path(os.environ.get("STRONGROOM_CACHE", Path.home() / ".cache" / "strongroom"))
