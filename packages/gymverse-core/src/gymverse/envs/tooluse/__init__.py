"""Tool-use built-in environments: operate an in-memory system through tool-like commands."""

from gymverse.registry import register

register("tooluse:SalesDatabase", "gymverse.envs.tooluse.sales_db:SalesDatabase")
register("tooluse:FileTrail", "gymverse.envs.tooluse.file_trail:FileTrail")
register("tooluse:BankTransfers", "gymverse.envs.tooluse.bank_transfers:BankTransfers")
register("tooluse:UnitConversion", "gymverse.envs.tooluse.unit_chain:UnitConversion")
