"""The real Kroxylicious proxy for the recovery tests: the launcher lives in :mod:`strongroom.testing.kroxylicious`
(the client benchmark's peer round starts the same proxy)."""

from strongroom.testing.kroxylicious import VERSION, KroxyliciousProxy, java21, libs

__all__ = ["VERSION", "KroxyliciousProxy", "java21", "libs"]
