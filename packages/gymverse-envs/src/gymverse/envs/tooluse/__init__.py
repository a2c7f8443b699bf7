"""Tool-use built-in environments: operate an in-memory system through tool-like commands."""

from gymverse.registry import register

register("tool-use:SalesDatabase", "gymverse.envs.tooluse.sales_db:SalesDatabase")
register("tool-use:FileTrail", "gymverse.envs.tooluse.file_trail:FileTrail")
register("tool-use:BankTransfers", "gymverse.envs.tooluse.bank_transfers:BankTransfers")
register("tool-use:UnitConversion", "gymverse.envs.tooluse.unit_chain:UnitConversion")
