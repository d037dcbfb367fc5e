"""Stored exemplars per class (unused by the SI baseline, which stores none)."""

from torch import nn


class MemoryBuffer(nn.Module):
    def __init__(self):
        super().__init__()
        self.use_memory_buffer = False
        self.budget_per_class = 100
        self.memory_sets = []
        self.prototypes = False
