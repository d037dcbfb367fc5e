"""Experiment driver (protected): the four target models of FML-bench's Privacy_privacymeter, trained as
privacy meter's run_mia.py trains its models, then exported for the auditor.

    python train.py --split val  --out OUT   train four WideResNet(nin=3, nclass=10, depth=28, width=2)
                                             from models/wide_resnet.py, one after the other, each with
                                             train() from trainers/default_trainer.py on the members in
                                             data/ and its own seed, export each to
                                             model_checkpoint/model_<k>/, copy those to OUT
    python train.py --split test --out OUT   copy model_checkpoint/ to OUT (no training, none of the
                                             editable code runs)

As the original's run (run.num_experiments 4), the val audit attacks one of the four models and the test
audit the other three; the utility floor applies to the mean accuracy of all four.

train(model, train_loader, configs, test_loader) is called as privacy meter calls it: train_loader yields
(images, labels) batches of 256, shuffled, images normalised as privacy meter does (ToTensor, then
Normalize(0.5, 0.5)); configs is the original's train section (cifar10_benchmark.yaml); test_loader is
None, because the images outside the training set are the auditor's. It returns the trained module.
The export (torch.export, decomposed to ATen operators) is a graph of tensor operations and the model's
tensors: the auditor runs it itself, so the forward pass must be exportable (no data-dependent Python
control flow) and use ATen operators that neither write to their arguments nor read uninitialised
memory. --scale smoke trains one epoch of small batches, for checking the code path on fixture data.
"""

from __future__ import annotations

import json
import operator
import random
import shutil
import sys
from pathlib import Path

import numpy as np
import torch
from torch.export import ExportedProgram
from torch.export.graph_signature import InputKind, OutputKind
from torch.utils.data import DataLoader, TensorDataset

from pytest_fmlbench.evalkit import harness_args

SEED = 12345  # the original's run.random_seed
# the original's train section (cifar10_benchmark.yaml); at smoke scale one epoch of small batches
TRAIN_CONFIG = {"model_name": "wrn28-2", "batch_size": 256, "optimizer": "SGD", "learning_rate": 0.1,
                "weight_decay": 0, "epochs": 50}
SMOKE_TRAIN = {"batch_size": 32, "epochs": 1}
TARGETS = 4  # the original's run.num_experiments
EXPORT_BATCH = 250  # the exported graph's (static) batch size; the auditor pads its last batch
DATA, CHECKPOINT = Path("data"), Path("model_checkpoint")
FILES = ("model_graph.json", "model_tensors.pt")


def normalise(images: np.ndarray) -> torch.Tensor:
    """privacy meter's transform for CIFAR-10: ToTensor, then Normalize(mean 0.5, std 0.5)."""
    return torch.from_numpy(((images.astype(np.float32) / 255.0 - 0.5) / 0.5).transpose(0, 3, 1, 2).copy())


def model_folder(root: Path, target: int) -> Path:
    return root / f"model_{target}"


def train_target(config: dict, images: np.ndarray, labels: np.ndarray, target: int) -> torch.nn.Module:
    from models.wide_resnet import WideResNet  # the editable files, next to this one
    from trainers.default_trainer import train

    seed = SEED + 10 * target  # each model its own draws (the original's share one stream, in turn)
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    # a fresh copy per model: a trainer that changes its batches in place changes only its own model's
    members = TensorDataset(normalise(images), torch.from_numpy(labels.copy()))
    loader = DataLoader(members, batch_size=config["batch_size"], shuffle=True)
    print(f"Training target model {target} of {TARGETS} on {len(members)} members: "
          + ", ".join(f"{key}={value}" for key, value in config.items()), flush=True)
    model = train(WideResNet(nin=3, nclass=10, depth=28, width=2), loader, dict(config), None)
    if isinstance(model, tuple):  # privacy meter's dp_train returns (model, epsilon)
        model = model[0]
    if not isinstance(model, torch.nn.Module):
        sys.exit(f"train.py: train() returned a {type(model).__name__}, not the trained torch.nn.Module")
    return model


def _encode(value):
    if isinstance(value, torch.fx.Node):
        return {"node": value.name}
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)):
        return [_encode(item) for item in value]
    for kind in (torch.dtype, torch.layout, torch.memory_format):
        if isinstance(value, kind):
            return {kind.__name__ if kind is not torch.dtype else "dtype": str(value).removeprefix("torch.")}
    if isinstance(value, torch.device):
        return {"device": str(value)}
    sys.exit(f"train.py: the exported model holds a {type(value).__name__} ({str(value)[:60]}), "
             "which the audit cannot load")


def export(model: torch.nn.Module, folder: Path) -> None:
    """The model's forward pass as a graph of ATen operators (model_graph.json) and its tensors (model_tensors.pt)."""
    model = model.to("cpu").eval()
    try:
        program: ExportedProgram = torch.export.export(model, (torch.zeros(EXPORT_BATCH, 3, 32, 32),))
        program = program.run_decompositions()
    except Exception as exc:  # any tracing failure: the model cannot be audited
        sys.exit(f"train.py: torch.export cannot export the model: {str(exc).splitlines()[0]}")
    stored = {**program.state_dict, **program.constants}
    graph = {"format": 1, "tensors": {}, "nodes": []}
    for spec in program.graph_signature.input_specs:
        if spec.kind == InputKind.USER_INPUT:
            graph["input"] = {"name": spec.arg.name, "shape": [EXPORT_BATCH, 3, 32, 32], "dtype": "float32"}
        elif spec.kind in (InputKind.PARAMETER, InputKind.BUFFER, InputKind.CONSTANT_TENSOR) \
                and isinstance(stored.get(spec.target), torch.Tensor):
            graph["tensors"][spec.arg.name] = spec.target
        else:
            sys.exit(f"train.py: the exported model takes a {spec.kind.name} input, which the audit cannot load")
    if any(spec.kind != OutputKind.USER_OUTPUT for spec in program.graph_signature.output_specs):
        sys.exit("train.py: the exported model's forward pass changes its own state, which the audit cannot replay")
    for node in program.graph_module.graph.nodes:
        if node.op == "call_function":
            if node.target is operator.getitem:
                op = "getitem"
            elif isinstance(node.target, torch._ops.OpOverload) and node.target.namespace == "aten":
                op = str(node.target)
            else:
                sys.exit(f"train.py: the exported model calls {node.target}, not an ATen operator")
            graph["nodes"].append({"name": node.name, "op": op, "args": _encode(node.args),
                                   "kwargs": {key: _encode(value) for key, value in node.kwargs.items()}})
        elif node.op == "output":
            graph["output"] = _encode(node.args[0])
        elif node.op != "placeholder":
            sys.exit(f"train.py: the exported model holds a {node.op} node ({node.target}), which the audit cannot run")
    folder.mkdir(parents=True, exist_ok=True)
    (folder / FILES[0]).write_text(json.dumps(graph))
    torch.save({key: stored[key].detach().cpu().contiguous().clone() for key in graph["tensors"].values()},
               folder / FILES[1])


def main() -> None:
    args = harness_args()
    if args.out is None:
        sys.exit("train.py: --out is required")
    if args.split == "val":
        device = "cuda:0" if torch.cuda.is_available() else "cpu"
        config = {**TRAIN_CONFIG, "device": device, **(SMOKE_TRAIN if args.scale == "smoke" else {})}
        images, labels = np.load(DATA / "members_images.npy"), np.load(DATA / "members_labels.npy")
        for target in range(TARGETS):
            export(train_target(config, images, labels, target), model_folder(CHECKPOINT, target))
    elif not all((model_folder(CHECKPOINT, target) / name).is_file() for target in range(TARGETS) for name in FILES):
        sys.exit("train.py: model_checkpoint/ holds no four exported models: the test run needs the val run's")
    for target in range(TARGETS):
        model_folder(args.out, target).mkdir(parents=True, exist_ok=True)
        for name in FILES:
            shutil.copyfile(model_folder(CHECKPOINT, target) / name, model_folder(args.out, target) / name)
    print(f"[{args.split}] the {TARGETS} exported models are in {args.out}", flush=True)


if __name__ == "__main__":
    main()
