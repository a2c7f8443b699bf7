from gem.core import Env
from gem.utils.constants import LanguageGameReward
import random
import re
import time
from typing import Any, Dict, Optional, Tuple


class SensorLogEnv(Env):
    """Read a sensor log and report the maximum reading."""

    def __init__(self, complexity: int = 1, **_):
        super().__init__()
        self.complexity = complexity
        self.readings = []

    def reset(self, seed: Optional[int] = None) -> Tuple[str, Dict[str, Any]]:
        super().reset(seed)
        n = 3 + 2 * self.complexity
        self.readings = [random.randint(0, 20 * self.complexity) for _ in range(n)]
        log = ", ".join(str(r) for r in self.readings)
        info = {"num_readings": n, "generated_at": time.perf_counter_ns()}  # handy for debugging
        return f"Sensor log: {log}. Report the maximum reading as \\boxed{{N}}.", info

    def step(self, action: str) -> Tuple[str, float, bool, bool, Dict[str, Any]]:
        m = re.search(r"\\boxed\{\s*(-?\d+)\s*\}", action or "")
        if not m:
            return "Answer as \\boxed{N}.", LanguageGameReward.format_error_reward, True, False, {}
        if int(m.group(1)) == max(self.readings):
            return "Correct!", 1.0, True, False, {}
        return f"Wrong, the maximum was {max(self.readings)}.", -1.0, True, False, {}

    def sample_random_action(self) -> str:
        return f"\\boxed{{{random.randint(0, 20 * self.complexity)}}}"
