"""Helpers the stand-in's modules share."""

from torch.utils.data import DataLoader


def checkattr(args, attr):
    """Whether ``args.attr`` exists and is the boolean True."""
    return isinstance(getattr(args, attr, None), bool) and getattr(args, attr)


def get_data_loader(dataset, batch_size, cuda=False, drop_last=False):
    return DataLoader(dataset, batch_size=batch_size, shuffle=True, drop_last=drop_last)
