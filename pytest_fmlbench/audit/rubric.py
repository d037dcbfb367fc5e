"""The research review's rubric (``rubric.yaml``, shipped in the package) and the prompt built from it."""

from __future__ import annotations

from functools import lru_cache
from importlib import resources

import yaml
from pydantic import BaseModel, ConfigDict


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Dimension(_Strict):
    name: str
    title: str
    question: str
    bands: dict[str, str]


class Confidence(_Strict):
    scale: tuple[int, int]
    question: str


class Rubric(_Strict):
    id: str
    scale: tuple[int, int]
    dimensions: list[Dimension]
    confidence: Confidence

    @property
    def names(self) -> list[str]:
        return [d.name for d in self.dimensions]

    def text(self) -> str:
        """The rubric as the judge reads it."""
        low, high = self.scale
        parts = []
        for i, dim in enumerate(self.dimensions, 1):
            bands = "\n".join(f"   {band}: {words}" for band, words in dim.bands.items())
            parts.append(f"{i}. {dim.title} ({low}-{high}): {dim.question}\n{bands}")
        c_low, c_high = self.confidence.scale
        parts.append(f"{len(self.dimensions) + 1}. Confidence ({c_low}-{c_high}): {self.confidence.question}")
        return "\n".join(parts)


@lru_cache(maxsize=1)
def load_rubric() -> Rubric:
    text = resources.files(__package__).joinpath("rubric.yaml").read_text(encoding="utf-8")
    return Rubric.model_validate(yaml.safe_load(text))
