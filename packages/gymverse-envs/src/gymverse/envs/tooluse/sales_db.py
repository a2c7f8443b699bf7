"""SalesDatabase: answer an aggregate question by querying a small in-memory relational database."""

from __future__ import annotations

from typing import Any

from gymverse.actions import CommandGrammar
from gymverse.core import EnvMetadata, StepResult
from gymverse.envs._command import CommandEnv, boxed
from gymverse.envs.tooluse._words import CITIES, FIRST_NAMES, PRODUCTS, sample_unique
from gymverse.text import plural

Row = dict[str, Any]
SCHEMA: dict[str, tuple[str, ...]] = {
    "customers": ("id", "name", "city"),
    "orders": ("id", "customer_id", "product_id", "qty"),
    "products": ("id", "name", "price"),
}
Plan = tuple[str, ...]


class SalesDatabase(CommandEnv):
    r"""Answer a question about customers, products and orders using equality-filter queries only.

    Commands: ``\boxed{tables}``, ``\boxed{schema T}``, ``\boxed{select T col value}`` (rows of T whose ``col``
    equals ``value``, case-insensitive), ``\boxed{count T col value}``, and ``\boxed{submit n}`` (ends the episode).
    There are no joins or sums: the agent chains lookups by id and aggregates itself.

    Question depth by level: 1 = count customers in a city; 2 = total quantity ordered of a product; 3 = the same,
    restricted to customers of one city (two lookups + a filtered join); 4 = total spending (qty x price) of a
    city's customers (a lookup per customer and per product bought).

    Rewards: 1.0 for the right number (success); 0.0 and episode end for a wrong one; 0.0 per query, including
    queries naming an unknown table or column (the feedback says which); -0.1 for a malformed command (base class).
    The turn budget is the oracle's plan (schema look-ups included) plus a slack shrinking from 6 to 1.
    """

    #: Pure Python, microseconds per step: pool sessions batch its calls (`gymverse.pool.batched`).
    nonblocking = True

    metadata = EnvMetadata(
        name="SalesDatabase",
        family="tool-use",
        domain="tool-use",
        description="Query an in-memory customers/products/orders database with equality filters to answer a question.",
        action_format=r"\boxed{tables}, \boxed{schema <T>}, \boxed{select <T> <col> <value>}, "
        r"\boxed{count <T> <col> <value>} or \boxed{submit <n>}",
        max_turns=40,
    )
    complexity_params = {
        "customers": (6, 40),
        "products": (4, 24),
        "orders": (10, 160),
        "depth": (1, 4),
        "slack": (6, 1),
    }
    grammar = CommandGrammar(
        {"tables": [], "schema": [str], "select": [str, str, str], "count": [str, str, str], "submit": [int]}
    )

    def _reset(self) -> tuple[str, dict[str, Any]]:
        p = self.params
        nc, npr, no = int(p["customers"]), int(p["products"]), int(p["orders"])
        cities = sample_unique(self.rng, CITIES, max(2, min(len(CITIES), nc // 3)))
        cbase, pbase = int(self.rng.integers(1, 500)), int(self.rng.integers(1, 500))
        names = sample_unique(self.rng, FIRST_NAMES, nc)
        customers = [{"id": cbase + i, "name": names[i], "city": self.pick(cities)} for i in range(nc)]
        products = [
            {"id": pbase + i, "name": n, "price": int(self.rng.integers(2, 100))}
            for i, n in enumerate(sample_unique(self.rng, PRODUCTS, npr))
        ]
        orders = [
            {
                "id": 1000 + i,
                "customer_id": int(self.pick(customers)["id"]),
                "product_id": int(self.pick(products)["id"]),
                "qty": int(self.rng.integers(1, 10)),
            }
            for i in range(no)
        ]
        self.db: dict[str, list[Row]] = {"customers": customers, "orders": orders, "products": products}
        self.question, self.answer, plan = self._make_question(int(p["depth"]), cities)
        self.plan: list[Plan] = plan
        self.executed: set[Plan] = set()
        self.params["max_turns"] = len(plan) + 1 + int(p["slack"])
        obs = (
            f"You can query a sales database (tables: {', '.join(SCHEMA)}). Question: {self.question} "
            r"Use \boxed{schema T}, \boxed{select T col value}, \boxed{count T col value}; answer with "
            rf"\boxed{{submit n}}. You have {plural(self.params['max_turns'], 'turn')}."
        )
        return obs, {"question": self.question}

    def rows(self, table: str, col: str, value: object) -> list[Row]:
        """Rows of `table` whose `col` equals `value` (compared as lower-case text)."""
        want = str(value).lower()
        return [r for r in self.db[table] if str(r[col]).lower() == want]

    def _make_question(self, depth: int, cities: list[str]) -> tuple[str, int, list[Plan]]:
        cust, prod = self.db["customers"], self.db["products"]
        price = {r["id"]: r["price"] for r in prod}
        if depth == 1:
            city = self.pick(sorted({r["city"] for r in cust}))
            plan = [("schema", "customers"), ("count", "customers", "city", city)]
            return f"How many customers live in {city}?", len(self.rows("customers", "city", city)), plan
        if depth == 4:
            spend: dict[str, int] = {}
            for o in self.db["orders"]:
                city = self.rows("customers", "id", o["customer_id"])[0]["city"]
                spend[city] = spend.get(city, 0) + o["qty"] * price[o["product_id"]]
            city = self.pick(sorted(spend))
            members = self.rows("customers", "city", city)
            plan = [("schema", t) for t in SCHEMA] + [("select", "customers", "city", city)]
            bought: list[int] = []
            for c in members:
                plan.append(("select", "orders", "customer_id", str(c["id"])))
                for o in self.rows("orders", "customer_id", c["id"]):
                    if o["product_id"] not in bought:
                        bought.append(o["product_id"])
            plan += [("select", "products", "id", str(pid)) for pid in bought]
            q = f"What is the total amount (quantity x unit price) spent by customers who live in {city}?"
            return q, spend[city], plan
        city_of = {r["id"]: r["city"] for r in cust}
        pairs = sorted({(o["product_id"], city_of[o["customer_id"]]) for o in self.db["orders"]})
        pid, city = self.pick(pairs)
        pname = self.rows("products", "id", pid)[0]["name"]
        matching = self.rows("orders", "product_id", pid)
        plan = [("schema", "products"), ("select", "products", "name", pname), ("schema", "orders")]
        if depth == 2:
            plan.append(("select", "orders", "product_id", str(pid)))
            return f"What total quantity of {pname} has been ordered?", sum(o["qty"] for o in matching), plan
        plan += [("schema", "customers"), ("select", "customers", "city", city)]
        plan.append(("select", "orders", "product_id", str(pid)))
        total = sum(o["qty"] for o in matching if city_of[o["customer_id"]] == city)
        return f"What total quantity of {pname} was ordered by customers who live in {city}?", total, plan

    def _check(self, table: str, col: str | None = None) -> str | None:
        if table.lower() not in SCHEMA:
            return f"Unknown table {table!r}; tables are {', '.join(SCHEMA)}."
        if col is not None and col.lower() not in SCHEMA[table.lower()]:
            return f"Table {table.lower()} has no column {col!r}; columns: {', '.join(SCHEMA[table.lower()])}."
        return None

    def _do_tables(self) -> StepResult:
        self.executed.add(("tables",))
        return self.feedback("Tables: " + ", ".join(SCHEMA) + ".")

    def _do_schema(self, table: str) -> StepResult:
        problem = self._check(table)
        if problem:
            return self.feedback(problem)
        t = table.lower()
        self.executed.add(("schema", t))
        return self.feedback(f"{t}({', '.join(SCHEMA[t])}); {len(self.db[t])} rows.")

    def _query(self, verb: str, table: str, col: str, value: str) -> tuple[str, list[Row]] | str:
        problem = self._check(table, col)
        if problem:
            return problem
        t, c = table.lower(), col.lower()
        self.executed.add((verb, t, c, value.lower()))
        return f"{t} where {c}={value}", self.rows(t, c, value)

    def _do_select(self, table: str, col: str, value: str) -> StepResult:
        res = self._query("select", table, col, value)
        if isinstance(res, str):
            return self.feedback(res)
        head, found = res
        cols = SCHEMA[table.lower()]
        lines = [f"{head}: {len(found)} row(s)", " | ".join(cols)]
        lines += [" | ".join(str(r[c]) for c in cols) for r in found]
        return self.feedback("\n".join(lines))

    def _do_count(self, table: str, col: str, value: str) -> StepResult:
        res = self._query("count", table, col, value)
        if isinstance(res, str):
            return self.feedback(res)
        return self.feedback(f"count of {res[0]}: {len(res[1])}")

    def _do_submit(self, n: int) -> StepResult:
        if n == self.answer:
            return self.finish(True, f"Correct: the answer is {n}.")
        return self.finish(False, f"Wrong: {n} is not the answer (it is {self.answer}).")

    def solve(self) -> str:
        return self.follow_plan(self.plan, self.executed, self.answer)

    def sample_random_action(self) -> str:
        if not hasattr(self, "db"):
            return boxed("tables")
        r = self.rng.random()
        table = self.pick(list(SCHEMA))
        if r < 0.1:
            return boxed("tables")
        if r < 0.2:
            return boxed("schema", table)
        if r < 0.8:
            row = self.pick(self.db[table])
            col = self.pick(list(SCHEMA[table]))
            return boxed("select" if r < 0.6 else "count", table, col, row[col])
        return boxed("submit", int(self.rng.integers(0, 200)))
