"""AgentGym-compatible routes, driven with requests shaped exactly like AgentGym's own env clients send them.

The two client classes below reproduce the HTTP calls of AgentGym's ``agentenv/envs/*.py`` clients line for line
(``requests``, the same paths, bodies, query strings and response fields; their prompt handling is left out):
``_IdClient`` is the shape of ``TextCraftEnvClient`` / ``BabyAIEnvClient`` / ``AlfWorldEnvClient`` (field ``id``),
``_EnvIdxClient`` the shape of ``WebshopEnvClient`` (field ``env_idx``, bare-int create, ``state`` in steps).
"""

from __future__ import annotations

from typing import Any

import gymverse
import pytest
import requests

GUESSES = [r"\boxed{1 2 3}", "Action: nonsense", r"\boxed{4 4 1}", r"\boxed{2 1 3}"]


class _IdClient:
    def __init__(self, env_server_base: str, timeout: int = 300) -> None:
        self.env_server_base = env_server_base
        self.timeout = timeout
        ok = requests.post(f"{self.env_server_base}/create", timeout=self.timeout)
        if ok.status_code != 200:
            raise requests.RequestException(f"Failed to create environment: {ok}")
        ok = ok.json()
        self.env_id = ok["id"]
        self.info = {"observation": ok["observation"], "reward": 0, "done": False}

    def _post(self, path: str, data: dict[str, Any]) -> Any:
        data["id"] = self.env_id
        res = requests.post(f"{self.env_server_base}/{path}", json=data, timeout=self.timeout)
        assert res.status_code == 200
        return res.json()

    def _get(self, path: str) -> Any:
        res = requests.get(f"{self.env_server_base}/{path}?id={self.env_id}", timeout=self.timeout)
        assert res.status_code == 200
        return res.json()

    def step(self, action: str) -> tuple[str, float, bool]:
        response = self._post("step", {"action": action})
        self.info = {
            "observation": response["observation"],
            "reward": response["reward"],
            "score": response["score"],
            "done": response["done"],
        }
        return response["observation"], response["reward"], response["done"]

    def reset(self, data_idx: int = 0) -> Any:
        response = self._post("reset", {"data_idx": data_idx})
        self.info.update({"observation": response["observation"], "reward": 0, "done": False})
        return response

    def close(self) -> Any:
        return self._post("close", {})


class _EnvIdxClient:
    def __init__(self, env_server_base: str, timeout: int = 300) -> None:
        self.env_server_base = env_server_base
        self.timeout = timeout
        ok = requests.post(f"{self.env_server_base}/create", timeout=self.timeout)
        if ok.status_code != 200:
            raise requests.RequestException(f"Failed to create environment: {ok}")
        self.env_id = ok.json()

    def _post(self, path: str, data: dict[str, Any]) -> Any:
        data["env_idx"] = self.env_id
        res = requests.post(f"{self.env_server_base}/{path}", json=data, timeout=self.timeout)
        assert res.status_code == 200
        return res.json()

    def _get(self, path: str) -> Any:
        res = requests.get(f"{self.env_server_base}/{path}?env_idx={self.env_id}", timeout=self.timeout)
        assert res.status_code == 200
        return res.json()

    def observe(self) -> Any:
        return self._get("observation")

    def step(self, action: str) -> tuple[str, float, bool]:
        response = self._post("step", {"action": action})
        return response["state"], response["reward"], response["done"]

    def reset(self, idx: int) -> Any:
        response = self._post("reset", {"session_id": idx})
        response[0] = self.observe()
        return response


def _local(seed: int) -> tuple[str, list[tuple[str, float, bool]]]:
    env = gymverse.make("game:Mastermind")
    obs, _ = env.reset(seed=seed)
    steps = [env.step(g) for g in GUESSES]
    return obs, [(s.observation, s.reward, s.done) for s in steps]


@pytest.mark.parametrize("prefix", ["", "/agentgym/game:Mastermind"])
def test_agentgym_id_clients_work_unchanged(start_server: Any, prefix: str) -> None:
    srv = start_server(agentgym="game:Mastermind")
    client = _IdClient(srv.url + prefix)
    other = _IdClient(srv.url + prefix)
    assert isinstance(client.env_id, int) and other.env_id == client.env_id + 1
    assert client.info["observation"].startswith("I hid a code")
    obs0, expected = _local(seed=5)
    assert client.reset(5)["observation"] == obs0  # the task index is the seed: same index, same instance
    assert [client.step(g) for g in GUESSES] == expected
    assert client.info["score"] == pytest.approx(sum(r for _, r, _ in expected))
    assert client._get("observation") == expected[-1][0]
    detail = client._get("detail")
    assert detail["id"] == client.env_id and detail["done"] is False and detail["info"]["turn"] == 4
    assert client.close() == {"closed": True}
    gone = requests.post(f"{srv.url}{prefix}/step", json={"id": client.env_id, "action": "x"}, timeout=10)
    assert gone.status_code == 404 and "error" in gone.json()  # a real status, and the key AgentGym looks for
    other.close()
    assert len(srv.manager.leases) == 0


def test_agentgym_webshop_dialect(start_server: Any) -> None:
    srv = start_server(agentgym="game:Mastermind", agentgym_dialect="env_idx")
    client = _EnvIdxClient(srv.url)
    assert isinstance(client.env_id, int)
    obs0, expected = _local(seed=9)
    assert client.reset(9) == [obs0, None]
    assert [client.step(g) for g in GUESSES] == expected
    assert client._post("close", {}) == {"closed": True}


def test_agentgym_routes_report_real_errors(start_server: Any) -> None:
    srv = start_server(agentgym="vectest:Faulty")
    bad = requests.post(f"{srv.url}/step", json={"id": 999, "action": "x"}, timeout=10)
    assert bad.status_code == 404 and bad.json()["error"] == "unknown_session"
    missing = requests.post(f"{srv.url}/step", json={"action": "x"}, timeout=10)
    assert missing.status_code == 400 and "'id'" in missing.json()["message"]
    assert requests.get(f"{srv.url}/observation?id=abc", timeout=10).status_code == 400
    unknown = requests.post(f"{srv.url}/agentgym/game:Nope/create", timeout=10)
    assert unknown.status_code == 404
    faulty = _IdClient(srv.url)  # env 0 is reset with seed 0, whose first step draws a failure (fail_rate 0.1)
    failed = faulty._post("step", {"action": r"\boxed{1}"})
    assert failed["done"] is True and failed["error"].startswith("ValueError: injected step failure")


def test_no_agentgym_env_at_the_root_unless_configured(start_server: Any) -> None:
    srv = start_server()
    r = requests.post(f"{srv.url}/create", timeout=10)
    assert r.status_code == 404 and "--agentgym" in r.json()["message"]
