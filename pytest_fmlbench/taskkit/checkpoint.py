"""A PyTorch checkpoint (``torch.save`` of a state dict, as torchvision's and timm's published weights are).

Only the fixture lives here: the harness copies verified weight files as they are, and the libraries
(torchvision, timm) read them inside the experiment.
"""

from __future__ import annotations

from pathlib import Path


def write_fixture(path: Path) -> None:
    """A small state dict in the ``.pth`` format, written deterministically (the smoke stand-in loads none)."""
    import torch

    path.parent.mkdir(parents=True, exist_ok=True)
    generator = torch.Generator().manual_seed(50)
    state = {"conv1.weight": torch.randn(4, 3, 3, 3, generator=generator), "fc.weight": torch.randn(2, 4, generator=generator),
             "fc.bias": torch.zeros(2)}
    tmp = path.with_name(path.name + ".tmp")
    torch.save(state, tmp)
    tmp.replace(path)
