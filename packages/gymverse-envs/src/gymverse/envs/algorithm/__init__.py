"""Algorithm-domain built-in environments: audits of a hidden structure under a query budget."""

from gymverse.registry import register

register("algorithm:HiddenGraphShortestPath", "gymverse.envs.algorithm.shortest_path:HiddenGraphShortestPath")
register("algorithm:HiddenArrayPeak", "gymverse.envs.algorithm.array_peak:HiddenArrayPeak")
register("algorithm:TopologicalSchedule", "gymverse.envs.algorithm.topo_schedule:TopologicalSchedule")
register("algorithm:IntervalScheduling", "gymverse.envs.algorithm.interval_schedule:IntervalScheduling")
