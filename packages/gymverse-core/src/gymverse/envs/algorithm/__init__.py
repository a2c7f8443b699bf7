"""algorithm built-in environments."""
