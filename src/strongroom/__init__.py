"""strongroom: keep the data you store in Apache Kafka safe."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("strongroom")
except PackageNotFoundError:  # running from a source tree without an install
    __version__ = "0.0.0+unknown"

__all__ = ["__version__"]
