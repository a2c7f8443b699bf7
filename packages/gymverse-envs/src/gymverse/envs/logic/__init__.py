"""Logic-domain built-in environments: constraint puzzles with paid ``check`` actions."""

from gymverse.registry import register

register("logic:LatinSquare", "gymverse.envs.logic.latin_square:LatinSquare")
register("logic:GraphColoring", "gymverse.envs.logic.graph_coloring:GraphColoring")
register("logic:Nonogram", "gymverse.envs.logic.nonogram:Nonogram")
register("logic:KnightsAndKnaves", "gymverse.envs.logic.knights_knaves:KnightsAndKnaves")
