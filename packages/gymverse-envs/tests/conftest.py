"""Shared setup of the gymverse-envs tests."""

from __future__ import annotations

import pytest

# The shared env-contract checks live in the library (all four family suites import them); rewrite their asserts
# like a test module's so failures show the compared values. Must run before the first import.
pytest.register_assert_rewrite("gymverse.envs._contract_testing")
