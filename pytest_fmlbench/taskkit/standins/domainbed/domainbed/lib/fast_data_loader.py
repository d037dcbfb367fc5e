"""Endless minibatches drawn with replacement, as DomainBed's training loop consumes them."""

import torch


class InfiniteDataLoader:
    def __init__(self, dataset, weights, batch_size, num_workers):
        if weights is not None:
            sampler = torch.utils.data.WeightedRandomSampler(weights, replacement=True, num_samples=batch_size)
        else:
            sampler = torch.utils.data.RandomSampler(dataset, replacement=True)
        batches = torch.utils.data.BatchSampler(sampler, batch_size=batch_size, drop_last=True)
        self._batches = batches
        self._loader = torch.utils.data.DataLoader(dataset, num_workers=num_workers, batch_sampler=batches)

    def __iter__(self):
        while True:
            yield from self._loader

    def __len__(self):
        raise ValueError
