"""AEAD suites, nonce and usage limits, DEK handling. Imports nothing from Kafka, Spark or the CLI."""
