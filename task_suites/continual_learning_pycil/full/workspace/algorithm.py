"""The experiment's PyCIL configuration (protected): iCaRL on CIFAR-100, 50 base classes then 5 sessions of 10.

As in FML-bench's Continual_Learning_pycil, this file is not yours to change: train.py reads it, and before
training it sets models/icarl.py's module-level hyper-parameters (init_epoch ... weight_decay below) from it,
as the original's script does. The reduced epochs (60 base, 50 per later session; PyCIL's own iCaRL
configuration trains 200 and 170) are the original's, chosen for its 30-minute budget. What you change is
models/icarl.py: the iCaRL class train.py builds, its training, distillation, exemplars and classifier.
"""


def get_pycil_config() -> dict:
    return {
        "prefix": "benchmark",
        "dataset": "cifar100",
        "memory_size": 2000,
        "memory_per_class": 20,
        "fixed_memory": False,
        "shuffle": True,
        "init_cls": 50,
        "increment": 10,
        "model_name": "icarl",
        "convnet_type": "resnet32",
        "device": ["0"],
        "seed": [1993],
        # the base session
        "init_epoch": 60,
        "init_lr": 0.1,
        "init_milestones": [20, 40, 50],
        "init_lr_decay": 0.1,
        "init_weight_decay": 0.0005,
        # every later session
        "epochs": 50,
        "lrate": 0.1,
        "milestones": [20, 35],
        "lrate_decay": 0.1,
        "batch_size": 128,
        "weight_decay": 0.0002,
    }
