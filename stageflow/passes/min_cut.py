"""Minimum s-t cuts of small directed graphs (Dinic's maximum flow).

Rematerialisation chooses the forward values to save by a minimum cut of the forward graph
(`stageflow.passes.remat`); graphs there have a few hundred nodes, so a plain Python max-flow
is fast enough and saves a dependency. Capacities are integers; `INFINITY` marks edges a cut
may not cross.
"""

from __future__ import annotations

from collections import deque

INFINITY = 1 << 62


class FlowNetwork:
    """A directed graph with integer edge capacities over nodes ``0 .. size - 1``."""

    def __init__(self, size: int) -> None:
        self.size = size
        # Edge i and its reverse i ^ 1 are stored side by side: target, residual capacity.
        self._target: list[int] = []
        self._capacity: list[int] = []
        self._edges: list[list[int]] = [[] for _ in range(size)]

    def add_edge(self, source: int, target: int, capacity: int) -> None:
        for tail, head, cap in ((source, target, capacity), (target, source, 0)):
            self._edges[tail].append(len(self._target))
            self._target.append(head)
            self._capacity.append(cap)

    def max_flow(self, source: int, sink: int) -> int:
        """Push the maximum flow from `source` to `sink`; its value."""
        total = 0
        while True:
            level = self._levels(source)
            if level[sink] < 0:
                return total
            cursor = [0] * self.size
            while True:
                pushed = self._augment(source, sink, INFINITY, level, cursor)
                if not pushed:
                    break
                total += pushed

    def reaches(self, sink: int) -> set[int]:
        """The nodes from which `sink` is reachable through edges with capacity left (after
        `max_flow`: the sink side of the minimum cut closest to the sink)."""
        incoming: list[list[int]] = [[] for _ in range(self.size)]
        for tail, edges in enumerate(self._edges):
            for edge in edges:
                if self._capacity[edge] > 0:
                    incoming[self._target[edge]].append(tail)
        seen, queue = {sink}, deque([sink])
        while queue:
            for tail in incoming[queue.popleft()]:
                if tail not in seen:
                    seen.add(tail)
                    queue.append(tail)
        return seen

    def _levels(self, source: int) -> list[int]:
        level = [-1] * self.size
        level[source] = 0
        queue = deque([source])
        while queue:
            node = queue.popleft()
            for edge in self._edges[node]:
                head = self._target[edge]
                if self._capacity[edge] > 0 and level[head] < 0:
                    level[head] = level[node] + 1
                    queue.append(head)
        return level

    def _augment(self, node: int, sink: int, limit: int, level: list[int],
                 cursor: list[int]) -> int:
        """One augmenting path's flow along the level graph (iterative depth-first search)."""
        path: list[int] = []
        stack = [node]
        while stack:
            current = stack[-1]
            if current == sink:
                flow = min([limit, *(self._capacity[e] for e in path)])
                for edge in path:
                    self._capacity[edge] -= flow
                    self._capacity[edge ^ 1] += flow
                return flow
            edges = self._edges[current]
            while cursor[current] < len(edges):
                edge = edges[cursor[current]]
                head = self._target[edge]
                if self._capacity[edge] > 0 and level[head] == level[current] + 1:
                    path.append(edge)
                    stack.append(head)
                    break
                cursor[current] += 1
            else:
                stack.pop()
                if path:
                    cursor[stack[-1]] += 1
                    path.pop()
        return 0
