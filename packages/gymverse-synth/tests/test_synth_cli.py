"""`gymverse synth` and `gymverse synth evolve` through the core CLI's plugin hook, against a scripted server."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from gymverse.cli import main
from gymverse.registry import deregister, list_envs
from gymverse_synth.artifacts import load_index, read_json
from gymverse_synth.seeds import Seed
from gymverse_synth.synth_cli import domain_seeds
from gymverse_synth.testing.router import StageRouter
from gymverse_synth.testing.scripted_server import ScriptedLLMServer

FIX = Path(__file__).parent / "synth_fixtures"
DESIGN = (FIX / "sort_design.json").read_text()
GOOD = (FIX / "good_env.py").read_text()
FAMILY = "synthcli"


@pytest.fixture(autouse=True)
def _clean_registry() -> Iterator[None]:
    yield
    for env_id in list_envs(FAMILY):
        deregister(env_id)


def test_synth_then_evolve_from_the_command_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    seeds = tmp_path / "seeds.jsonl"
    seeds.write_text("# one seed\n" + Seed(domain="Algorithm", idea="sorting by swaps").model_dump_json() + "\n")
    out = tmp_path / "run"
    common = ["--max-tokens", "800", "--timeout", "20", "--no-progress"]
    with ScriptedLLMServer(handler=StageRouter([DESIGN], [f"```python\n{GOOD}```"])) as server:
        argv = ["synth", "--seeds", str(seeds), "--llm", server.base_url, "--out", str(out), "--family", FAMILY]
        assert main([*argv, *common]) == 0
        assert server.completion_requests[0].body["max_tokens"] == 800
    printed = capsys.readouterr().out
    assert "accepted" in printed and "summary.json" in printed
    assert read_json(out / "summary.json")["accepted"] == 1
    assert f"{FAMILY}:SortBySwaps" in list_envs(FAMILY)

    harder = json.loads(DESIGN)
    harder["complexity_params"][0]["level_10"] = 14
    variant = GOOD.replace('"length": (3, 12)', '"length": (3, 14)')
    with ScriptedLLMServer(handler=StageRouter([json.dumps(harder)], [f"```python\n{variant}```"])) as server:
        env_dir = out / "suite" / "SortBySwaps"
        argv = ["synth", "evolve", str(env_dir), "--success", "0.85", "--llm", server.base_url, "--name", "SortHard"]
        assert main([*argv, *common]) == 0
    assert "accepted" in capsys.readouterr().out
    index = load_index(out / "suite")["envs"]
    assert sorted(e["artifact"] for e in index.values()) == ["SortBySwaps", "SortHard"]
    assert (out / "suite" / ".evolve").is_dir()  # the evolution's stage records


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["synth", "--domain", "Game", "--out", "X"], "--llm is required"),
        (["synth", "--llm", "local"], "give --seeds FILE or --domain D"),
        (["synth", "--seeds", "/nonexistent/seeds.jsonl", "--llm", "http://127.0.0.1:9"], "No such file"),
        (["synth", "--domain", "Cooking", "--llm", "local"], "unknown domain 'Cooking'"),
        (["synth", "evolve", "/nonexistent", "--success", "2", "--llm", "local"], "success rate in [0, 1]"),
    ],
)
def test_usage_errors_exit_2_with_a_clear_message(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    assert message in capsys.readouterr().err


def test_domain_seeds_cycle_builtins_with_distinct_ids() -> None:
    seeds = domain_seeds("Game", 7)
    assert len(seeds) == 7 and len({s.id for s in seeds}) == 7
    assert all(s.domain == "Game" and s.kind == "builtin" for s in seeds)
    assert seeds[0].payload["env_id"].startswith("game:")
    with pytest.raises(ValueError, match="no built-in env of domain 'Logic'"):
        domain_seeds("Logic", 1, specs=[])
