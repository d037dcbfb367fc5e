"""The search journal: every executed step is a node; ``parent`` links make the tree agents grow."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Literal

from .record import StepRecord


class Journal:
    def __init__(self, direction: Literal["higher", "lower"]):
        self.direction = direction
        self.nodes: list[StepRecord] = []

    def __len__(self) -> int:
        return len(self.nodes)

    def __iter__(self) -> Iterator[StepRecord]:
        return iter(self.nodes)

    def add(self, node: StepRecord) -> None:
        self.nodes.append(node)

    def get(self, step: int) -> StepRecord:
        return self.nodes[step - 1]

    def children(self, step: int) -> list[StepRecord]:
        return [n for n in self.nodes if n.parent == step]

    @property
    def draft_nodes(self) -> list[StepRecord]:
        return [n for n in self.nodes if n.parent is None]

    @property
    def good_nodes(self) -> list[StepRecord]:
        return [n for n in self.nodes if not n.is_buggy]

    @property
    def buggy_nodes(self) -> list[StepRecord]:
        return [n for n in self.nodes if n.is_buggy]

    def is_leaf(self, step: int) -> bool:
        return not self.children(step)

    def debug_depth(self, step: int) -> int:
        """How many buggy ancestors in a row end at this node (0 for a node whose parent is good)."""
        depth = 0
        node = self.get(step)
        while node.parent is not None and node.action == "debug":
            depth += 1
            node = self.get(node.parent)
        return depth

    def better(self, a: float, b: float) -> bool:
        return a > b if self.direction == "higher" else a < b

    def best_node(self) -> StepRecord | None:
        """The first node reaching the best metric (later ties do not displace it)."""
        best = None
        for node in self.good_nodes:
            if node.metric is not None and (best is None or self.better(node.metric, best.metric)):
                best = node
        return best
