"""Durability audit: ledger, scrub, sensitive-operation watcher, scores and report."""
