"""Small vocabularies the tool-use envs draw names from (fixed lists, so instances depend only on the RNG)."""

from __future__ import annotations

import numpy as np

FIRST_NAMES: tuple[str, ...] = (
    "ava", "ben", "chloe", "dev", "elena", "farid", "grace", "hugo", "ines", "jonas", "kira", "liam", "maya",
    "nils", "olga", "pablo", "quinn", "rosa", "sami", "tara", "umar", "vera", "wren", "xavi", "yara", "zane",
    "aiko", "bruno", "celia", "dario", "esme", "felix",
)  # fmt: skip
CITIES: tuple[str, ...] = (
    "lyon", "oslo", "porto", "quito", "riga", "sofia", "tunis", "utrecht", "vigo", "warsaw", "york", "zagreb",
)  # fmt: skip
PRODUCTS: tuple[str, ...] = (
    "anvil", "bolt", "cable", "drill", "easel", "funnel", "gasket", "hinge", "ink", "jack", "kettle", "ladder",
    "magnet", "nozzle", "oar", "pulley", "quill", "rivet", "spool", "tongs", "valve", "wrench", "yoke", "zipper",
)  # fmt: skip
WORDS: tuple[str, ...] = (
    "alpha", "amber", "atlas", "beacon", "cedar", "cobalt", "delta", "ember", "falcon", "garnet", "harbor",
    "indigo", "juniper", "kestrel", "lumen", "maple", "nebula", "onyx", "pepper", "quartz", "raven", "sierra",
    "tundra", "umber", "velvet", "willow", "yonder", "zephyr",
)  # fmt: skip


def sample_unique(rng: np.random.Generator, pool: tuple[str, ...], k: int) -> list[str]:
    """`k` distinct names from `pool`; numeric suffixes extend the pool when `k` exceeds it."""
    names = list(pool)
    suffix = 2
    while len(names) < k:
        names += [f"{n}{suffix}" for n in pool]
        suffix += 1
    return [names[int(i)] for i in rng.choice(len(names), size=k, replace=False)]
