"""Built-in tool-use envs: oracle solvability, determinism, format errors, baselines and golden rules."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from fractions import Fraction

import gymverse
import pytest
from gymverse.envs._contract_testing import (
    check_baseline_fails,
    check_clone_and_state_replay,
    check_levels_change_instances_and_horizon,
    check_malformed_actions,
    check_oracle_solves,
    check_random_actions_handled,
    check_same_seed_same_transcript,
    check_wrong_answer_ends_episode,
)
from gymverse.envs.tooluse.bank_transfers import BankTransfers
from gymverse.envs.tooluse.file_trail import FileTrail
from gymverse.envs.tooluse.sales_db import SalesDatabase
from gymverse.envs.tooluse.unit_chain import UnitConversion

IDS = ["tool-use:SalesDatabase", "tool-use:FileTrail", "tool-use:BankTransfers", "tool-use:UnitConversion"]
LEVELS = [1, 5, 10]
SEEDS = [0, 1, 2, 3]
WRONG_ANSWER = {
    IDS[0]: lambda e: rf"\boxed{{submit {e.answer + 1}}}",
    IDS[1]: lambda e: rf"\boxed{{submit {e.code + 1}}}",
    IDS[2]: lambda e: r"\boxed{commit}",
    IDS[3]: lambda e: rf"\boxed{{submit {e.answer + 1}}}",
}
BAD_ARITY = {
    IDS[0]: r"\boxed{select orders qty}",
    IDS[1]: r"\boxed{grep x}",
    IDS[2]: r"\boxed{commit now}",
    IDS[3]: r"\boxed{calc 1 +}",
}
BAD_INT = {
    IDS[0]: r"\boxed{submit many}",
    IDS[1]: r"\boxed{submit 12ab}",
    IDS[2]: r"\boxed{transfer ava ben ten}",
    IDS[3]: r"\boxed{calc 1 + x}",
}


def test_ids_registered_with_domain() -> None:
    assert set(IDS) <= set(gymverse.list_envs("tool-use"))
    for env_id in IDS:
        env = gymverse.make(env_id)
        assert env.metadata.domain == "tool-use"
        assert env.metadata.name == env_id.split(":")[1]


@pytest.mark.parametrize("env_id", IDS)
def test_random_actions_are_well_formed_and_handled(env_id: str) -> None:
    check_random_actions_handled(env_id)


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("env_id", IDS)
def test_oracle_succeeds(env_id: str, level: int) -> None:
    for seed in SEEDS:
        steps = check_oracle_solves(gymverse.make(env_id, complexity=level), seed)
        assert steps[-1].terminated
        assert not steps[-1].truncated
        assert not any(s.info.get("rejected") for s in steps)


@pytest.mark.parametrize("env_id", IDS)
def test_same_seed_same_transcript(env_id: str) -> None:
    check_same_seed_same_transcript(env_id, LEVELS)


@pytest.mark.parametrize("env_id", IDS)
def test_levels_change_instances_and_horizon(env_id: str) -> None:
    check_levels_change_instances_and_horizon(env_id)


@pytest.mark.parametrize("env_id", IDS)
def test_malformed_actions_are_format_errors(env_id: str) -> None:
    bad = [
        "submit 3",  # no box
        r"\boxed{commit",  # unbalanced
        r"\boxed{rm -rf /}",
        BAD_ARITY[env_id],
        BAD_INT[env_id],
        r"\boxed{submit " + "9" * 5000 + "}",
    ]
    check_malformed_actions(env_id, bad)


@pytest.mark.parametrize("env_id", IDS)
def test_wrong_final_answer_ends_episode(env_id: str) -> None:
    check_wrong_answer_ends_episode(env_id, WRONG_ANSWER[env_id])


@pytest.mark.parametrize("policy", ["random", "constant", "first-oracle"])
@pytest.mark.parametrize("env_id", IDS)
def test_baseline_policies_fail_at_high_levels(env_id: str, policy: str) -> None:
    check_baseline_fails(env_id, policy)


@pytest.mark.parametrize("env_id", IDS)
def test_clone_and_state_branch_identically(env_id: str) -> None:
    check_clone_and_state_replay(env_id)


DIGEST_SCRIPT = """
import hashlib, gymverse
h = hashlib.sha256()
for env_id in %r:
    env = gymverse.make(env_id, complexity=7)
    obs, _ = env.reset(seed=3)
    h.update(obs.encode())
    for i in range(30):
        res = env.step(env.sample_random_action() if i %% 3 == 0 else env.solve())
        h.update(res.observation.encode())
        if res.done:
            break
print(h.hexdigest())
"""


def test_transcripts_do_not_depend_on_string_hashing() -> None:
    """Set iteration order of strings changes with PYTHONHASHSEED; transcripts must not."""
    digests = set()
    for hash_seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": hash_seed}
        out = subprocess.run(
            [sys.executable, "-c", DIGEST_SCRIPT % (IDS,)], env=env, capture_output=True, text=True, check=True
        )
        digests.add(out.stdout.strip())
    assert len(digests) == 1


# ---------------------------------------------------------------- SalesDatabase
def reference_answer(env: SalesDatabase) -> int:
    """The question's answer recomputed from its text with plain comprehensions (independent of the env)."""
    db, q = env.db, env.question
    price = {p["id"]: p["price"] for p in db["products"]}
    city_of = {c["id"]: c["city"] for c in db["customers"]}
    pid = {p["name"]: p["id"] for p in db["products"]}
    if m := re.fullmatch(r"How many customers live in (\w+)\?", q):
        return sum(c["city"] == m[1] for c in db["customers"])
    if m := re.fullmatch(r"What total quantity of (\w+) has been ordered\?", q):
        return sum(o["qty"] for o in db["orders"] if o["product_id"] == pid[m[1]])
    if m := re.fullmatch(r"What total quantity of (\w+) was ordered by customers who live in (\w+)\?", q):
        return sum(o["qty"] for o in db["orders"] if o["product_id"] == pid[m[1]] and city_of[o["customer_id"]] == m[2])
    m = re.search(r"spent by customers who live in (\w+)\?", q)
    assert m, q
    return sum(o["qty"] * price[o["product_id"]] for o in db["orders"] if city_of[o["customer_id"]] == m[1])


@pytest.mark.parametrize("level", [1, 4, 7, 10])
def test_sales_answers_match_reference(level: int) -> None:
    env = SalesDatabase(complexity=level)
    for seed in range(5):
        env.reset(seed=seed)
        assert env.answer == reference_answer(env) > 0


def test_sales_query_rules_on_fixed_tables() -> None:
    env = SalesDatabase(complexity=1)
    env.reset(seed=0)
    env.db = {
        "customers": [{"id": 1, "name": "ann", "city": "lyon"}, {"id": 2, "name": "bo", "city": "oslo"}],
        "products": [{"id": 10, "name": "bolt", "price": 5}, {"id": 11, "name": "ink", "price": 7}],
        "orders": [
            {"id": 1000, "customer_id": 1, "product_id": 10, "qty": 2},
            {"id": 1001, "customer_id": 2, "product_id": 10, "qty": 4},
            {"id": 1002, "customer_id": 1, "product_id": 11, "qty": 3},
        ],
    }
    out = env.step(r"\boxed{select orders customer_id 1}").observation
    assert "2 row(s)" in out
    assert "1000 | 1 | 10 | 2" in out
    assert "1001" not in out
    assert "count of customers where city=LYON: 1" in env.step(r"\boxed{count CUSTOMERS city LYON}").observation
    assert "no column 'town'" in env.step(r"\boxed{select customers town lyon}").observation
    assert "Unknown table 'users'" in env.step(r"\boxed{schema users}").observation
    assert "0 row(s)" in env.step(r"\boxed{select products name anvil}").observation


# ---------------------------------------------------------------- FileTrail
def solve_from_text(env: FileTrail, obs: str) -> bool:
    """Follow the trail using only what the observations say; True if the submitted code is accepted."""
    path = re.search(r"Start by reading (\S+) ", obs)
    assert path
    current = path[1]
    while True:
        text = env.step(rf"\boxed{{cat {current}}}").observation
        if m := re.search(r"Next note: (\S+)", text):
            current = m[1]
        elif m := re.search(r"carries tag (\S+) somewhere under (\S+)\.", text):
            hits = env.step(rf"\boxed{{grep {m[1]} {m[2]}}}").observation
            found = re.search(rf"^(\S+): tag: {m[1]}$", hits, re.MULTILINE)
            assert found, hits
            current = found[1]
        else:
            code = re.search(r"access_code = (\d+)", text)
            assert code, text
            return bool(env.step(rf"\boxed{{submit {code[1]}}}").info["success"])


@pytest.mark.parametrize("level", [1, 5, 10])
def test_file_trail_is_solvable_from_observations_alone(level: int) -> None:
    for seed in range(4):
        env = FileTrail(complexity=level)
        assert solve_from_text(env, env.reset(seed=seed)[0])


def test_file_trail_shell_rules_on_fixed_tree() -> None:
    env = FileTrail(complexity=1)
    env.reset(seed=0)
    env.dirs = {"/", "/etc", "/home", "/home/a"}
    env.files = {
        "/home/a/n1.txt": ["Next note: /etc/n2.txt"],
        "/etc/n2.txt": ["tag: ref-1", "access_code = 123456"],
        "/home/x.txt": ["access_code = 999999"],
    }
    env.cwd = "/"
    assert env.step(r"\boxed{ls /home}").observation.startswith("/home: a/  x.txt")
    assert "Working directory is now /home/a" in env.step(r"\boxed{cd home/a}").observation
    assert "Next note: /etc/n2.txt" in env.step(r"\boxed{cat n1.txt}").observation
    assert "/etc/n2.txt" in env.step(r"\boxed{cat ../../etc/n2.txt}").observation
    assert "is a directory" in env.step(r"\boxed{cat ..}").observation
    assert "no such file" in env.step(r"\boxed{ls /nope}").observation
    hits = env.step(r"\boxed{grep access_code /home}").observation
    assert "/home/x.txt: access_code = 999999" in hits
    assert "/etc" not in hits
    assert "no match" in env.step(r"\boxed{grep ref-2 /}").observation
    assert env.step(r"\boxed{pwd}").observation.startswith("/home/a")


# ---------------------------------------------------------------- BankTransfers
def fixed_bank() -> BankTransfers:
    env = BankTransfers(complexity=1)
    env.reset(seed=0)
    env.names, env.balance, env.target, env.cap = ["ann", "bo", "cy"], [10, 0, 5], [0, 5, 10], 6
    env.parent, env.nbrs = [-1, 0, 1], [[1], [0, 2], [1]]  # a chain ann - bo - cy
    env.params["max_turns"] = 50
    return env


def test_bank_rules_reject_invalid_transfers_without_side_effects() -> None:
    env = fixed_bank()
    assert env._edge_flows() == {(2, 1): -5, (1, 0): -10}
    for cmd, why in [
        ("transfer ann cy 1", "not linked"),
        ("transfer ann bo 7", "between 1 and 6"),
        ("transfer ann bo 0", "between 1 and 6"),
        ("transfer bo cy 1", "insufficient funds"),
        ("transfer ann zed 1", "Unknown account 'zed'"),
    ]:
        res = env.step(rf"\boxed{{{cmd}}}")
        assert why in res.observation
        assert res.info["rejected"] is True
        assert env.balance == [10, 0, 5]
    assert "ann=4, bo=6" in env.step(r"\boxed{transfer ANN bo 6}").observation
    res = env.step(r"\boxed{commit}")
    assert res.terminated
    assert res.info["success"] is False
    assert "ann=4 (target 0)" in res.observation


def test_bank_oracle_routes_through_intermediate() -> None:
    env = fixed_bank()
    env.queried_balance, env.queried_links = {0, 1, 2}, {0, 1, 2}
    actions = []
    while not env.done:
        actions.append(env.solve())
        res = env.step(actions[-1])
    assert actions == [
        r"\boxed{transfer ann bo 6}",
        r"\boxed{transfer ann bo 4}",
        r"\boxed{transfer bo cy 5}",
        r"\boxed{commit}",
    ]
    assert res.info["success"] is True
    assert env.balance == env.target


# ---------------------------------------------------------------- UnitConversion
def fixed_units() -> UnitConversion:
    env = UnitConversion(complexity=1)
    env.reset(seed=0)
    env.names, env.nbrs = ["zorp", "blen", "kelt", "mirn"], [{1}, {0, 2}, {1}, set()]
    env.size = [Fraction(1), Fraction(1, 3), Fraction(1, 12), Fraction(5)]  # 1 zorp = 3 blen, 1 blen = 4 kelt
    env.quantity, env.source, env.target, env.answer = 5, 0, 2, Fraction(60)
    env.plan, env.executed = env._plan(), set()
    env.params["max_turns"] = 30
    return env


def test_unit_conversion_tools_on_fixed_table() -> None:
    env = fixed_units()
    assert "blen converts directly to: kelt, zorp." in env.step(r"\boxed{links BLEN}").observation
    assert "1 blen = 4 kelt." in env.step(r"\boxed{factor blen kelt}").observation
    assert "1 kelt = 1/4 blen." in env.step(r"\boxed{factor kelt blen}").observation
    assert "No direct conversion" in env.step(r"\boxed{factor zorp kelt}").observation
    assert "Unknown unit 'inch'" in env.step(r"\boxed{factor inch kelt}").observation
    assert "3/8 * 2 = 3/4 (~0.75)" in env.step(r"\boxed{calc 3/8 * 2}").observation
    assert "Division by zero" in env.step(r"\boxed{calc 1 / 0}").observation
    assert "Unknown operator '^'" in env.step(r"\boxed{calc 2 ^ 3}").observation
    assert env.clone().step(r"\boxed{submit 60.00000001}").info["success"] is True  # within 1e-6 relative
    assert env.clone().step(r"\boxed{submit 60.1}").info["success"] is False
    actions = []
    while not env.done:
        actions.append(env.solve())
        res = env.step(actions[-1])
    assert actions == [
        r"\boxed{links zorp}",
        r"\boxed{factor zorp blen}",
        r"\boxed{calc 5 * 3}",
        r"\boxed{calc 15 * 4}",  # links blen and factor blen kelt were already done
        r"\boxed{submit 60}",
    ]
    assert res.info["success"] is True


@pytest.mark.parametrize("level", [1, 5, 10])
def test_unit_conversion_answer_is_product_along_any_path(level: int) -> None:
    for seed in range(4):
        env = UnitConversion(complexity=level)
        env.reset(seed=seed)
        # factors are ratios of hidden sizes, so every route between the two units agrees
        for u in range(len(env.names)):
            for v in env.nbrs[u]:
                assert env.size[u] / env.size[v] * (env.size[v] / env.size[u]) == 1
        assert env.answer == env.quantity * env.size[env.source] / env.size[env.target]
        assert env._bfs(env.source)[env.target] == env.params["hops"]
