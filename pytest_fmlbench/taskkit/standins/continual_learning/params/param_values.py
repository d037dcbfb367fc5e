"""The method's options and the experiment's defaults (the repository's values for split MNIST, class scenario)."""

from utils import checkattr


def set_method_options(args, **kwargs):
    if checkattr(args, "si"):
        args.weight_penalty = True
        args.importance_weighting = "si"


def set_default_values(args, also_hyper_params=True, **kwargs):
    args.normalize = False
    args.depth = 0 if args.depth is None else args.depth
    args.fc_lay = 3 if args.fc_lay is None else args.fc_lay
    args.fc_units = 400 if args.fc_units is None else args.fc_units
    args.contexts = 5 if args.contexts is None else args.contexts
    args.iters = 2000 if args.iters is None else args.iters
    args.lr = 0.001 if args.lr is None else args.lr
    args.batch = 128 if args.batch is None else args.batch
    args.loss_log = args.iters if args.loss_log is None else args.loss_log
    args.acc_log = args.iters if args.acc_log is None else args.acc_log
    if also_hyper_params and args.reg_strength is None:
        args.reg_strength = 5000. if checkattr(args, "si") else 1.


def check_for_errors(args, **kwargs):
    if args.importance_weighting not in (None, "si"):
        raise NotImplementedError("the stand-in estimates parameter importance with SI only")
