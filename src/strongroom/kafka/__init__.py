"""Typed wrappers over confluent-kafka, resilient client defaults, encrypting producer / decrypting consumer."""
