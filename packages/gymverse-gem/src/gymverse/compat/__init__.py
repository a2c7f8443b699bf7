"""Interop with other env ecosystems (GEM: `gymverse.compat.gem`)."""
