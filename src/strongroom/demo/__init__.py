"""The end-to-end story behind ``make demo`` / ``strongroom demo``: it grows with every capability."""
