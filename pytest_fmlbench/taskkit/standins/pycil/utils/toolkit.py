"""Small helpers the learners share."""

import numpy as np


def count_parameters(model, trainable=False):
    return sum(p.numel() for p in model.parameters() if p.requires_grad or not trainable)


def tensor2numpy(x):
    return x.detach().cpu().numpy()


def accuracy(y_pred, y_true, nb_old, increment=10):
    """Top-1 accuracy in percent (two decimals): overall, on old classes and on new ones."""
    def percent(mask):
        return 0 if not mask.any() else np.around((y_pred[mask] == y_true[mask]).sum() * 100 / mask.sum(), decimals=2)

    everything = np.ones(len(y_true), dtype=bool)
    return {"total": percent(everything), "old": percent(y_true < nb_old), "new": percent(y_true >= nb_old)}
