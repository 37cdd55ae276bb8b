"""Shipped test kit: local Kafka cluster launcher, KMS server launchers, pytest plugin."""
