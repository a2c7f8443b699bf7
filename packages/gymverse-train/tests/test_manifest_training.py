"""An evaluated suite becomes a training suite: a manifest's GEM-style files train like built-ins, in workers too."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from gymverse.cli import main
from gymverse.manifest import ManifestError, read_manifest, write_manifest
from gymverse.vector import make_vec

CORPUS = Path(__file__).parents[2] / "gymverse-eval" / "tests" / "gem_corpus"


def _manifest(tmp_path: Path) -> Path:
    """A manifest as `gymverse evaluate` writes it: only passing, safe envs get in."""
    rows = [
        {"name": "gem:number_hunt", "ref": f"gem:{CORPUS / 'number_hunt.py'}", "verdict": "unverified", "flags": []},
        {"name": "gem:parity_check", "ref": f"gem:{CORPUS / 'parity_check.py'}", "verdict": "unverified",
         "flags": ["guessable_answer"], "warnings": ["guessable_answer"]},
        {"name": "gem:host_report", "ref": f"gem:{CORPUS / 'host_report.py'}", "verdict": "incorrect",
         "flags": ["unsafe", "incorrect"]},
        {"name": "gem:balance_scale", "ref": f"gem:{CORPUS / 'balance_scale.py'}", "verdict": "incorrect",
         "flags": ["degenerate_constant"]},
    ]  # fmt: skip
    return write_manifest(tmp_path / "eval" / "manifest.json", "gem_corpus", rows)


def test_the_manifest_lists_only_passing_safe_envs_and_builds_them_in_pool_workers(tmp_path: Path) -> None:
    path = _manifest(tmp_path)
    refs = read_manifest(path.parent)  # the evaluation's folder works as well as the file
    assert refs == [f"gem:{CORPUS / 'number_hunt.py'}", f"gem:{CORPUS / 'parity_check.py'}"]
    vec = make_vec(str(path), backend="process", seed=0, backend_options={"num_workers": 2})
    try:
        obs, _ = vec.reset()
        assert len(obs) == 2 and "even" in obs[1]
        res = vec.step(["\\boxed{50}", "\\boxed{yes}"])
        assert all(isinstance(r, float) for r in res.rewards)
    finally:
        vec.close()


def test_a_bad_manifest_is_a_clear_error(tmp_path: Path) -> None:
    bad = tmp_path / "manifest.json"
    bad.write_text(json.dumps({"format": "gymverse-manifest", "version": 1, "envs": []}))
    with pytest.raises(ManifestError, match="no env passed evaluation"):
        read_manifest(bad)
    bad.write_text("{}")
    with pytest.raises(ManifestError, match="not a GymVerse manifest"):
        read_manifest(bad)


def test_gymverse_train_takes_the_manifest(model_dir: Path, tmp_path: Path, capsys: Any) -> None:
    path = _manifest(tmp_path)
    out = tmp_path / "run"
    argv = ["train", "--model", str(model_dir), "--envs", str(path), "--steps", "1", "--prompts", "1"]
    argv += ["--group-size", "2", "--max-turns", "2", "--max-new-tokens", "4", "--threads", "1", "--out", str(out)]
    assert main(argv) == 0, capsys.readouterr().err
    metrics = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert set(metrics[-1]["complexity_by_env"]) == set(read_manifest(path))
