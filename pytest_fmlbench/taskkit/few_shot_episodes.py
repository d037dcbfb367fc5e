"""Few-shot episodes with easyfsl's TaskSampler: the protocol shared by the experiment and the evaluator.

data_efficiency_easyfsl's evaluator (which recomputes the validation episodes instead of trusting the
experiment's) and its prepare.py import this module; every workspace of the task receives a copy of it as
episodes.py (protected, used by train.py). Evaluation as in easyfsl's scripts/benchmark_methods.py: 5-way 1-shot tasks with 15
queries per class, sampled by easyfsl's TaskSampler and assembled by its episodic_collate_fn; the
validation tasks are drawn with seed 42, as the original drew its validation episodes.
"""

from __future__ import annotations

import random

import numpy as np
import torch
from easyfsl.datasets import FeaturesDataset
from easyfsl.samplers import TaskSampler
from torch.utils.data import DataLoader, Sampler

from pytest_fmlbench.evalkit import SplitConfig, split_indices

N_WAY, N_SHOT, N_QUERY = 5, 1, 15
VAL_TASKS = 500
VAL_SEED = 42


class _SamplerTakingDataSource(Sampler):
    """easyfsl 1.5's TaskSampler calls Sampler.__init__(data_source=None), which torch >= 2.2 rejects;
    placed after TaskSampler in the MRO, this accepts the argument and drops it."""

    def __init__(self, data_source=None):
        super().__init__()


class EpisodeSampler(TaskSampler, _SamplerTakingDataSource):
    """easyfsl's TaskSampler, unchanged, made constructible on this torch."""


def split_classes(labels: np.ndarray, config: SplitConfig) -> tuple[np.ndarray, np.ndarray]:
    """(base classes, validation classes): split_config.json cuts the visible classes, not the images."""
    classes = np.unique(labels)
    base, val = split_indices(len(classes), config)
    return classes[base], classes[val]


def sample_episodes(features: np.ndarray, labels: np.ndarray, n_tasks: int, seed: int) -> list[tuple]:
    """All n_tasks episodes, drawn at once: [(support, support_labels, query, query_labels, class_ids)].

    support (N_WAY*N_SHOT, ...) / query (N_WAY*N_QUERY, ...) are rows of `features`; labels are the
    episode's own 0..N_WAY-1 (easyfsl's collate); class_ids maps them back to `labels`' values. Drawing
    every episode before any method runs keeps them independent of what the method does with `random`.
    """
    dataset = FeaturesDataset([int(c) for c in labels], torch.as_tensor(features), [str(c) for c in np.unique(labels)])
    sampler = EpisodeSampler(dataset, n_way=N_WAY, n_shot=N_SHOT, n_query=N_QUERY, n_tasks=n_tasks)
    loader = DataLoader(dataset, batch_sampler=sampler, collate_fn=sampler.episodic_collate_fn)
    state = random.getstate()
    random.seed(seed)
    try:
        return list(loader)
    finally:
        random.setstate(state)
