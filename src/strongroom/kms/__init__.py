"""Key management: the KMS interface, its errors, one module per provider, and wrappers."""
