"""logic built-in environments."""
