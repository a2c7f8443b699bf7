"""Reference solvers used while writing the environments (not an environment)."""
from collections import Counter
from typing import List


def most_named(clues: List[str]) -> str:
    """The suspect named by the most clues."""
    names = [w for c in clues for w in c.split() if w.startswith("Suspect_")]
    return Counter(names).most_common(1)[0][0]


def parity(values: List[int]) -> str:
    return "yes" if sum(values) % 2 == 0 else "no"


class SolverRegistry:
    def __init__(self):
        self.solvers = {"clue_court": most_named, "parity_check": parity}

    def get(self, name: str):
        return self.solvers[name]
