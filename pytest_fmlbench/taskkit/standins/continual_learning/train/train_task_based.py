"""Training one classifier on the contexts one after the other (the stand-in's loop, SI's bookkeeping included)."""

import tqdm

from models.cl.continual_learner import ContinualLearner
from utils import get_data_loader


def train_cl(model, train_datasets, iters=2000, batch_size=32, baseline="none", loss_cbs=(), eval_cbs=(),
             sample_cbs=(), context_cbs=(), **kwargs):
    model.train()
    device, cuda = model._device(), model._is_on_cuda()
    si = isinstance(model, ContinualLearner) and model.importance_weighting == "si"
    if si:
        model.register_starting_param_values()
    for context, dataset in enumerate(train_datasets, 1):
        if si:
            path, before = model.prepare_importance_estimates_dicts()
        active_classes = (list(range(model.classes_per_context * context))
                          if model.neg_samples == "all-so-far" else None)
        progress = tqdm.tqdm(range(1, iters + 1))
        batches = iter(())
        for batch_index in range(1, iters + 1):
            x_y = next(batches, None)
            if x_y is None:
                batches = iter(get_data_loader(dataset, batch_size, cuda=cuda, drop_last=True))
                x_y = next(batches)
            x, y = (t.to(device) for t in x_y)
            loss_dict = model.train_a_batch(x, y, active_classes=active_classes, context=context)
            if si:
                model.update_importance_estimates(path, before)
            for loss_cb in loss_cbs:
                if loss_cb is not None:
                    loss_cb(progress, batch_index, loss_dict, context=context)
        progress.close()
        if si:
            model.update_omega(path, model.epsilon)
