"""tooluse built-in environments."""
