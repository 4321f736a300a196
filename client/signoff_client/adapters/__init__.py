"""Framework adapters: each keeps its framework's own pause and puts signoff underneath it."""
