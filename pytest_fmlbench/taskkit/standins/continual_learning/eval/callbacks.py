"""The training loop's progress report."""


def _classifier_loss_cb(log=1, visdom=None, model=None, contexts=None, iters_per_context=None, progress_bar=True):
    def cb(bar, iteration, loss_dict, context=1):
        if progress_bar and bar is not None:
            bar.set_description(f"<CLASSIFIER> | Context: {context}/{contexts} | training loss: "
                                f"{loss_dict['loss_total']:.3} | training accuracy: {loss_dict['accuracy']:.3} |")
            bar.update(1)

    return cb
