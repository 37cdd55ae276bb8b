"""Versioned wire format of encrypted records. Imports nothing from Kafka, Spark or the CLI."""
