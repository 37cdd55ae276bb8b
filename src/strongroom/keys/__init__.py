"""Per-subject key lifecycle: keys topic, key table, erasure and its verification."""
