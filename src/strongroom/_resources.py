"""Files shipped inside the package (``strongroom/resources``): the Kafka POM, log4j2 and Ivy settings."""

from __future__ import annotations

from importlib import resources
from pathlib import Path


def resource_path(name: str) -> Path:
    """The real filesystem path of a shipped resource (the package is installed unzipped)."""
    return Path(str(resources.files("strongroom") / "resources" / name))
