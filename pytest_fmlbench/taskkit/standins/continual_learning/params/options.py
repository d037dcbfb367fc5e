"""The command-line options the split MNIST task's driver reads (a subset of the repository's)."""

import argparse


def define_args(filename, description):
    return argparse.ArgumentParser(f"./{filename}.py", description=description)


def add_general_options(parser, **kwargs):
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-gpus", action="store_false", dest="gpu")
    parser.add_argument("--data-dir", type=str, default="./store/datasets", dest="d_dir")
    return parser


def add_eval_options(parser, **kwargs):
    parser.add_argument("--loss-log", type=int)
    parser.add_argument("--acc-log", type=int)
    return parser


def add_problem_options(parser, **kwargs):
    parser.add_argument("--experiment", type=str, default="splitMNIST", choices=["splitMNIST"])
    parser.add_argument("--scenario", type=str, default="class", choices=["task", "domain", "class"])
    parser.add_argument("--contexts", type=int)
    parser.add_argument("--iters", type=int)
    parser.add_argument("--batch", type=int)
    parser.add_argument("--no-norm", action="store_false", dest="normalize")
    return parser


def add_model_options(parser, **kwargs):
    parser.add_argument("--depth", type=int, default=None)
    parser.add_argument("--fc-layers", type=int, default=None, dest="fc_lay")
    parser.add_argument("--fc-units", type=int)
    return parser


def add_train_options(parser, **kwargs):
    parser.add_argument("--lr", type=float)
    parser.add_argument("--optimizer", type=str, default="adam", choices=["adam", "adam_reset", "sgd"])
    parser.add_argument("--momentum", type=float, default=0.)
    parser.add_argument("--active-classes", type=str, default="all", dest="neg_samples",
                        choices=["all", "all-so-far", "current"])
    return parser


def add_cl_options(parser, **kwargs):
    parser.add_argument("--si", action="store_true")
    parser.add_argument("--weight-penalty", action="store_true")
    parser.add_argument("--reg-strength", type=float)
    parser.add_argument("--importance-weighting", type=str, choices=["fisher", "si", "owm"])
    parser.add_argument("--epsilon", type=float, default=0.1)
    parser.add_argument("--replay", type=str, default="none", choices=["none"])
    parser.add_argument("--budget", type=int)
    return parser
