"""Hosted evaluation in fewer round trips judges exactly as before: batched episodes (noisy oracle included) give
the in-process outcomes, and one env job (`hosted_env_job`) serves correctness and every scripted policy from one
host, with the same evidence as the separate jobs."""

from __future__ import annotations

from pathlib import Path
from typing import TypedDict

import pytest
from gymverse.evaluate.correctness import CorrectnessConfig, check_hosted
from gymverse.evaluate.jobs import hosted_env_job, hosted_levels_job
from gymverse.evaluate.policies import make_policy, run_episodes
from gymverse.evaluate.suites import build_env
from gymverse.sandbox import SandboxLimits
from gymverse.sandbox.hosted import EnvHost

LIMITS = SandboxLimits(timeout=200, memory_mb=1024)
CORPUS = Path(__file__).parent / "gem_corpus"


class _HostArgs(TypedDict):
    """The host arguments every hosted job takes alike."""

    files: dict[str, str]
    limits: SandboxLimits
    call_timeout: float


@pytest.mark.parametrize("ref", ["game:Mastermind", "tool-use:BankTransfers"])
@pytest.mark.parametrize("policy", ["noisy:0.3", "random", "oracle"])
def test_batched_hosted_episodes_are_the_in_process_ones(ref: str, policy: str) -> None:
    for level in (1, 10):
        local = [e.to_dict() for e in run_episodes(build_env(ref, level), make_policy(policy), range(12), None)]
        with EnvHost("gymverse.loader:build_from_ref", [ref], limits=LIMITS) as host:
            env = host.make(level)
            sent = env._session.seq
            remote = run_episodes(env, make_policy(policy), list(range(12)), None, timeout=5.0)
            assert env._session.seq == sent + 1  # twelve episodes, one request
        assert [e.to_dict() for e in remote] == local


def test_a_hang_in_a_batch_costs_one_episode_timeout_and_ends_the_level() -> None:
    src = (CORPUS / "lottery_draw.py").read_text()  # draws distinct numbers forever at high levels
    with EnvHost("gymverse.loader:build_from_ref", ["gem:lottery_draw.py"], files={"lottery_draw.py": src},
                 limits=LIMITS) as host:  # fmt: skip
        episodes = run_episodes(host.make(10), make_policy("random"), list(range(16)), None, timeout=1.0)
    hung = [e for e in episodes if e.timed_out]
    assert len(hung) == 1 and hung[0].error and hung[0].error.startswith("timeout")
    after = episodes[episodes.index(hung[0]) + 1 :]
    assert all(not e.success and e.error == f"not run: seed {hung[0].seed} of this level timed out" for e in after)


def test_one_env_job_gives_the_evidence_of_the_separate_jobs() -> None:
    src = (CORPUS / "number_hunt.py").read_text()
    files, ref = {"number_hunt.py": src}, "gem:number_hunt.py"
    ccfg = CorrectnessConfig(reset_seeds=16)
    plan = {k: v for k, v in ccfg.job_kwargs(ref).items() if k != "ref"}
    common: _HostArgs = {"files": files, "limits": LIMITS, "call_timeout": 10.0}
    levels, seeds = [1, 10], [0, 1, 2, 3]
    merged = hosted_env_job(ref, check=plan, job_timeout=120.0, policies=["random", "oracle"], levels=levels,
                            seeds=seeds, timeout=60.0, episode_timeout=3.0, **common)  # fmt: skip
    alone = check_hosted(ref, job_timeout=120.0, **plan, **common)
    random = hosted_levels_job(ref, "random", levels, seeds, timeout=60.0, episode_timeout=3.0, **common)
    check = merged["check"]
    for key in ("checker", "degeneracy", "degeneracy_counts", "probes", "facts", "audit"):
        if key == "checker":
            strip = [{k: v for k, v in r.items() if k != "seconds"} for r in check[key]["results"]]
            assert strip == [{k: v for k, v in r.items() if k != "seconds"} for r in alone[key]["results"]]
        else:
            assert check[key] == alone[key], key
    assert check["host"]["starts"] == 1  # one host for every stage
    assert list(merged["episodes"]) == ["random"]  # a GEM env without solve(): no oracle episodes
    assert merged["episodes"]["random"]["levels"] == random["levels"]
