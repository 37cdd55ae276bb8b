"""Spark: session factory, pure DataFrame transforms, and jobs (one module per pipeline).

The DataFrame API and the session factory are exported here and imported on first use (importing this
package does not import PySpark; executors import only the modules they run)::

    from strongroom.spark import build_spark_session, decrypt_dataframe, encrypt_dataframe
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from strongroom.spark.dataframes import decrypt_dataframe, encrypt_dataframe
    from strongroom.spark.session import build_spark_session

_EXPORTS = {
    "build_spark_session": "strongroom.spark.session",
    "decrypt_dataframe": "strongroom.spark.dataframes",
    "encrypt_dataframe": "strongroom.spark.dataframes",
}

__all__ = ["build_spark_session", "decrypt_dataframe", "encrypt_dataframe"]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'strongroom.spark' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
