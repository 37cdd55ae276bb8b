"""Lost-KEK recovery: KEK inventory, boundary search, plans and their application."""
