from gem.core import Env
from gem.utils.constants import LanguageGameReward
import random
import re
from typing import Tuple, Dict, Any, Optional, List


class ClueCourtEnv(Env):
    def __init__(self, complexity: int = 1, enable_param_randomization: bool = True, max_turns: Optional[int] = 12, **_):
        super().__init__()
        self.complexity = max(1, min(10, complexity))
        self.enable_param_randomization = enable_param_randomization
        self.max_turns = max_turns if max_turns is not None else 12
        # Evolvable parameters
        self.complexity_params = {
            # more suspects: bigger decision space
            'num_suspects': (2, 9),
            # more clues: more to read
            'num_clues': (3, 12),
        }
        self.param_variance = {'num_suspects': 1, 'num_clues': 1}
        self.num_suspects: int = 0
        self.num_clues: int = 0
        self.turn_count: int = 0
        self.active: bool = True
        self.suspects: List[str] = []
        self.true_index: int = -1
        self.clues: List[str] = []
        self.reset()

    def _apply_complexity_params(self):
        normalized = min(1.0, (self.complexity - 1) / 9.0)
        for name, (min_v, max_v) in self.complexity_params.items():
            actual = min_v + (max_v - min_v) * normalized
            if self.enable_param_randomization:
                var = self.param_variance.get(name, 0)
                actual = max(min_v, min(max_v, actual + random.uniform(-var, var)))
            setattr(self, name, int(round(actual)))

    def _generate_case(self):
        self.suspects = [f"Suspect_{chr(65 + i)}" for i in range(self.num_suspects)]
        self.true_index = random.randrange(self.num_suspects)
        self.clues = []
        for ci in range(self.num_clues):
            if random.random() < 0.6:
                self.clues.append(f"Clue {ci + 1}: a witness places {self.suspects[self.true_index]} at the scene")
            else:
                other = random.randrange(self.num_suspects)
                self.clues.append(f"Clue {ci + 1}: a rumour mentions {self.suspects[other]}")

    def _get_instructions(self) -> str:
        suspects_list = "\n".join(f"- [{i}] {name}" for i, name in enumerate(self.suspects))
        return (
            "Clue Court: name the culprit.\n"
            "Actions: \\boxed{INSPECT} shows the clues, \\boxed{DECIDE index=<k>} names suspect k (ends the case).\n"
            f"Suspects:\n{suspects_list}\n"
            f"Example: {self.sample_random_action()}\n"
        )

    def reset(self, seed: Optional[int] = None) -> Tuple[str, Dict[str, Any]]:
        super().reset(seed)
        if seed is not None:
            random.seed(seed)
        self._apply_complexity_params()
        self.turn_count = 0
        self.active = True
        self._generate_case()
        return self._get_instructions(), {"suffix": "Awaiting INSPECT or DECIDE."}

    def step(self, action: str) -> Tuple[str, float, bool, bool, Dict[str, Any]]:
        if not self.active:
            return "TERMINAL: Episode already ended.", 0.0, True, False, {}
        self.turn_count += 1
        parsed = self._parse_action(action)
        if not parsed:
            self.active = False
            return "INVALID ACTION FORMAT: use \\boxed{...}.", LanguageGameReward.format_error_reward, True, False, {}
        act = parsed.get("action", "").upper()
        if act == "INSPECT":
            if self.turn_count >= self.max_turns:
                self.active = False
                return f"Reached max turns ({self.max_turns}).", 0.0, True, True, {}
            return "\n".join(self.clues), 0.0, False, False, {}
        if act == "DECIDE":
            idx = parsed.get("index")
            if idx is None or not re.fullmatch(r"-?\d+", idx):
                self.active = False
                return "PROTOCOL VIOLATION: DECIDE requires index=<integer>.", -1.0, True, False, {}
            self.active = False
            k = int(idx)
            if k == self.true_index:
                return f"SUCCESS: {self.suspects[k]} did it.", 1.0, True, False, {}
            return f"FAILURE: the culprit was index {self.true_index}.", -1.0, True, False, {}
        self.active = False
        return f"UNSUPPORTED ACTION: '{act}'.", -1.0, True, False, {}

    def _parse_action(self, action: str) -> Optional[Dict[str, Any]]:
        m = re.search(r"\\boxed\{(.+?)\}\s*$", (action or "").strip(), flags=re.DOTALL)
        if not m:
            return None
        parts = m.group(1).strip().split()
        if not parts:
            return None
        tokens: Dict[str, Any] = {"action": parts[0]}
        for part in parts[1:]:
            if "=" in part:
                k, v = part.split("=", 1)
                tokens[k.strip()] = v.strip()
        return tokens

    def sample_random_action(self) -> str:
        if random.random() < 0.3:
            return r"\boxed{INSPECT}"
        return rf"\boxed{{DECIDE index={random.randrange(max(1, self.num_suspects))}}}"


class ClueCourtEnvWithFeedback(ClueCourtEnv):
    def __init__(self, feedback_level: int = 2, **kwargs):
        self.feedback_level = feedback_level
        super().__init__(**kwargs)

    def step(self, action: str) -> Tuple[str, float, bool, bool, Dict[str, Any]]:
        obs, reward, terminated, truncated, info = super().step(action)
        text = obs.lower()
        error_type = "OK"
        hint = None
        if "invalid action format" in text:
            error_type = "FormatError"
            hint = "Wrap your action like \\boxed{DECIDE index=0}."
        elif "failure" in text:
            error_type = "WrongDecision"
            hint = "INSPECT the clues and pick the suspect most witnesses name."
        info["diagnostic"] = {"error_type": error_type, "turn": self.turn_count}
        if self.feedback_level >= 2:
            info["diagnostic"]["hint"] = hint
        return obs, reward, terminated, truncated, info
