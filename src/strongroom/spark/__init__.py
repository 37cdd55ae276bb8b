"""Spark: session factory, pure DataFrame transforms, and jobs (one module per pipeline)."""
