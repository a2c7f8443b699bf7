"""Every registered built-in env passes every check of the env checker (levels 1, 5, 10; seeds 0, 1)."""

from __future__ import annotations

import gymverse
import pytest
from gymverse.checker import CHECK_NAMES, check_env
from gymverse.registry import builtin_ids

# gymverse-core's envs and the trainer's demo envs; installed suites (gymverse-suites: 100+ envs, some on a JVM) are
# checked by their own tests, and the vectest: fixtures break the contract on purpose
BUILTINS = builtin_ids() + gymverse.list_envs("demo")


@pytest.mark.parametrize("env_id", BUILTINS)
def test_builtin_env_passes_the_checker(env_id: str) -> None:
    report = check_env(env_id, levels=(1, 5, 10), seeds=(0, 1))
    assert report.passed, report.summary()
    assert {r.name for r in report.results} == set(CHECK_NAMES)


def test_there_are_builtins_in_every_domain() -> None:
    domains = {gymverse.make(i).metadata.domain for i in BUILTINS}
    assert {"game", "algorithm", "logic", "tool-use"} <= domains
