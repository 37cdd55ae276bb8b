"""Doctor: a registry of cluster, topic and client configuration rules."""
