"""GymVerse for OpenRLHF 0.11.2: agent file, dataset builder, PERPO env-level advantages, complexity evolution."""

__version__ = "0.1.0"
