"""Experiment driver (protected): the repository's academic continual learning setting on split MNIST, class
scenario, as FML-bench's Continual_Learning_continual_learning runs GMvandeVen/continual-learning's main with
``--experiment=splitMNIST --scenario=class --si``.

    python train.py --split val  --out OUT   train the five contexts on data/train_*.npy, save the model as
                                             model_checkpoint/model.pt, label data/val_images.npy into
                                             OUT/predictions.npy
    python train.py --split test --out OUT   load model_checkpoint/model.pt (no training) and label
                                             OUT/test_images.npy into OUT/predictions.npy

Like the original's main, the val run parses the repository's options (params/options.py) from that command,
lets params/param_values.py choose the method's options and defaults (set_method_options, set_default_values,
check_for_errors), builds the classifier with models/define_models.py, sets the continual-learning attributes on
it from the options, and trains it with train/train_task_based.py, one context after the other. After the last
context it labels every scored image as the repository's eval.evaluate.test_acc classifies it (model.classify
over all ten classes, in eval mode): the digits come without their context, as the class scenario has it, and
without labels, which only the evaluator holds.

The repository's MNIST data set (torchvision's) reads the harness's files instead (data/train_images.npy and
data/train_labels.npy, also as its "test" source: with visdom and plots off, as in the original's command, the
training loop never evaluates on it). The protocol is fixed: split MNIST, class scenario, five contexts of two
digits in order ({0,1} ... {8,9}). --scale smoke trains a few iterations of small batches, for checking the
code path on fixture data.
"""

from __future__ import annotations

import os

# before the repository imports tqdm: its per-context progress bars refresh every 30 s in the log
os.environ.setdefault("TQDM_MININTERVAL", "30")

import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402
from PIL import Image  # noqa: E402
from torch import optim  # noqa: E402
from torch.utils.data import DataLoader, Dataset  # noqa: E402
from torchvision import transforms  # noqa: E402

from pytest_fmlbench.evalkit import harness_args  # noqa: E402

import data.available  # noqa: E402  (the repository's code, copied from its verified checkout)
import utils  # noqa: E402
from data.load import get_context_set  # noqa: E402
from eval import callbacks as cb  # noqa: E402
from models import define_models as define  # noqa: E402
from models.cl.continual_learner import ContinualLearner  # noqa: E402  (editable)
from models.cl.memory_buffer import MemoryBuffer  # noqa: E402
from params import options  # noqa: E402
from params import param_values  # noqa: E402  (editable)
from train import train_task_based  # noqa: E402  (editable)
from utils import checkattr  # noqa: E402

# the original's command line
ORIGINAL_COMMAND = ["--experiment=splitMNIST", "--scenario=class", "--si"]
SMOKE_COMMAND = ["--iters=5", "--batch=32"]
PROTOCOL = {"experiment": "splitMNIST", "scenario": "class", "contexts": 5}
DATA, CHECKPOINT = Path("data"), Path("model_checkpoint") / "model.pt"
# what only training uses, and a pickle cannot hold (the optimizer lists hold filter objects)
TRAINING_ONLY = ("optimizer", "optim_list")
SCORE_BATCH = 128  # test_acc's batch size


class HarnessMNIST(Dataset):
    """torchvision's MNIST as the repository uses it (images as PIL, targets, transform, target_transform), over
    the harness's training digits; its "test" part holds them too."""

    def __init__(self, root, train=True, download=False, transform=None, target_transform=None):
        self.data = torch.from_numpy(np.load(DATA / "train_images.npy"))
        self.targets = torch.from_numpy(np.load(DATA / "train_labels.npy"))
        self.transform, self.target_transform = transform, target_transform

    def __len__(self) -> int:
        return len(self.data)

    def __getitem__(self, index):
        image, target = Image.fromarray(self.data[index].numpy()), int(self.targets[index])
        if self.transform is not None:
            image = self.transform(image)
        if self.target_transform is not None:
            target = self.target_transform(target)
        return image, target


class ScoredImages(Dataset):
    """The images to label, through the repository's MNIST transforms, with placeholder labels."""

    def __init__(self, images: np.ndarray):
        self.images = images
        self.transform = transforms.Compose(data.available.AVAILABLE_TRANSFORMS["MNIST"])

    def __len__(self) -> int:
        return len(self.images)

    def __getitem__(self, index):
        return self.transform(Image.fromarray(self.images[index])), 0


def handle_inputs(scale: str):
    """The original's options: the repository's parser on the original's command, then param_values.py."""
    kwargs = {"main": True}
    parser = options.define_args(filename="main", description="FML-bench's split MNIST, class scenario")
    for add in (options.add_general_options, options.add_eval_options, options.add_problem_options,
                options.add_model_options, options.add_train_options, options.add_cl_options):
        parser = add(parser, **kwargs)
    args = parser.parse_args(ORIGINAL_COMMAND + (SMOKE_COMMAND if scale == "smoke" else []))
    param_values.set_method_options(args)
    param_values.set_default_values(args, also_hyper_params=True)
    param_values.check_for_errors(args, **kwargs)
    changed = {key: getattr(args, key, None) for key, value in PROTOCOL.items() if getattr(args, key, None) != value}
    if changed:
        sys.exit(f"train.py: the protocol is {PROTOCOL}; params/param_values.py set {changed}")
    return args


def make_optimizer(network, args) -> None:
    """The original's optimizer over the parameters that require gradients (unless FROMP brings its own)."""
    network.optim_list = [{"params": filter(lambda p: p.requires_grad, network.parameters()), "lr": args.lr}]
    network.optim_type = args.optimizer
    if network.optim_type in ("adam", "adam_reset"):
        network.optimizer = optim.Adam(network.optim_list, betas=(0.9, 0.999))
    elif network.optim_type == "sgd":
        network.optimizer = optim.SGD(network.optim_list, momentum=args.momentum if hasattr(args, "momentum") else 0.)


def feature_extractor_for(args, config, device, depth):
    """Frozen convolutional layers that the data goes through once, where the options ask for them."""
    use = checkattr(args, "hidden") or (checkattr(args, "freeze_convE") and args.replay != "generative"
                                        and not checkattr(args, "add_buffer") and not checkattr(args, "gen_classifier"))
    if not (use and depth > 0):
        return None
    extractor = define.define_feature_extractor(args=args, config=config, device=device)
    define.init_params(extractor, args, verbose=True)
    for param in extractor.parameters():
        param.requires_grad = False
    extractor.eval()
    return extractor


def configure_continual_learning(model, args, config) -> None:
    """The continual-learning attributes the original's main sets on the classifier from the options."""
    model.scenario = args.scenario
    model.classes_per_context = config["classes_per_context"]
    model.singlehead = checkattr(args, "singlehead")
    model.neg_samples = args.neg_samples if hasattr(args, "neg_samples") else "all"
    learner = isinstance(model, ContinualLearner)
    if learner and checkattr(args, "xdg") and args.gating_prop > 0.:
        model.mask_dict = {}
        for context_id in range(args.contexts):
            model.mask_dict[context_id + 1] = {}
            for i in range(model.fcE.layers):
                layer = getattr(model.fcE, f"fcLayer{i + 1}").linear
                if context_id == 0:
                    model.excit_buffer_list.append(layer.excit_buffer)
                model.mask_dict[context_id + 1][i] = np.random.choice(
                    len(layer.excit_buffer), size=int(args.gating_prop * len(layer.excit_buffer)), replace=False)
    # parameter regularisation: Fisher-based (EWC, online EWC, KFAC, NCL) or SI, as a penalty or a preconditioner
    use_fisher = getattr(args, "importance_weighting", None) == "fisher" and (
        checkattr(args, "precondition") or checkattr(args, "weight_penalty"))
    if learner and use_fisher:
        model.fisher_n = getattr(args, "fisher_n", None)
        model.fisher_labels = getattr(args, "fisher_labels", "all")
        model.fisher_batch = getattr(args, "fisher_batch", 1)
        model.offline = checkattr(args, "offline")
        if not model.offline:
            model.gamma = getattr(args, "gamma", 1.)
        if checkattr(args, "fisher_init"):
            model.data_size = args.data_size
            model.context_count = 1
            if model.fisher_kfac:
                model.initialize_kfac_fisher()
            else:
                model.initialize_fisher()
    if learner and checkattr(args, "weight_penalty"):
        model.weight_penalty = True
        model.importance_weighting = args.importance_weighting
        model.reg_strength = args.reg_strength
        if model.importance_weighting == "si":
            model.epsilon = getattr(args, "epsilon", 0.1)
    if learner and checkattr(args, "precondition"):
        model.precondition = True
        model.importance_weighting = args.importance_weighting
        model.alpha = args.alpha
    # functional regularisation and replay
    if learner and hasattr(args, "replay"):
        model.replay_targets = "soft" if checkattr(args, "distill") else "hard"
        model.KD_temp = getattr(args, "temp", 2.)
        if args.replay == "current" and model.replay_targets == "soft":
            model.lwf_weighting = True
    if checkattr(args, "fromp"):
        from models.cl import fromp_optimizer

        model.optimizer = fromp_optimizer.opt_fromp(model, lr=args.lr, tau=args.tau, betas=(0.9, 0.999))
    if learner and hasattr(args, "replay"):
        model.replay_mode = args.replay
    if learner and hasattr(args, "use_replay"):
        model.use_replay = args.use_replay
        model.eps_agem = getattr(args, "eps_agem", 0.)
    # a memory buffer (the original's rules allow no stored training samples; prototypes and FROMP use one)
    if isinstance(model, MemoryBuffer) and (checkattr(args, "prototypes") or checkattr(args, "add_buffer")
                                            or args.replay == "buffer" or checkattr(args, "fromp")):
        model.use_memory_buffer = True
        model.budget_per_class = args.budget
        model.use_full_capacity = checkattr(args, "use_full_capacity")
        model.sample_selection = getattr(args, "sample_selection", "random")
        model.norm_exemplars = model.sample_selection == "herding"
    model.add_buffer = checkattr(args, "add_buffer")
    model.prototypes = checkattr(args, "prototypes")
    if model.label == "Classifier":
        model.binaryCE = checkattr(args, "bce")
        model.binaryCE_distill = checkattr(args, "bce_distill")


def separate_generator(args, config, device, depth):
    """DGR's generative model, where the options ask for replay of generated data without feedback."""
    if not (args.replay == "generative" and not checkattr(args, "feedback")):
        return None
    generator = define.define_vae(args=args, config=config, device=device, depth=depth)
    define.init_params(generator, args, verbose=True)
    generator.optim_list = [{"params": filter(lambda p: p.requires_grad, generator.parameters()), "lr": args.lr_gen}]
    generator.optim_type = args.optimizer
    if generator.optim_type in ("adam", "adam_reset"):
        generator.optimizer = optim.Adam(generator.optim_list, betas=(0.9, 0.999))
    elif generator.optim_type == "sgd":
        generator.optimizer = optim.SGD(generator.optim_list)
    return generator


def train(args, device):
    """The original's run() up to its evaluation: data, feature extractor, classifier, strategy, training."""
    (train_datasets, _), config = get_context_set(
        name=args.experiment, scenario=args.scenario, contexts=args.contexts, data_dir=args.d_dir,
        normalize=checkattr(args, "normalize"), verbose=True, exception=True,
        singlehead=checkattr(args, "singlehead"), train_set_per_class=checkattr(args, "gen_classifier"))
    depth = args.depth if hasattr(args, "depth") else 0
    extractor = feature_extractor_for(args, config, device, depth)
    if extractor is not None:
        config = {**config, "size": extractor.conv_out_size, "channels": extractor.conv_out_channels}
        depth = 0
        train_datasets = utils.preprocess(extractor, train_datasets, config, batch=args.batch, message="<TRAINSET>")

    model = define.define_classifier(args=args, config=config, device=device, depth=depth)
    networks = len(train_datasets) if checkattr(args, "separate_networks") or checkattr(args, "gen_classifier") else 1
    for network_id in range(networks):
        network = (getattr(model, f"context{network_id + 1}") if checkattr(args, "separate_networks") else
                   getattr(model, f"vae{network_id}") if checkattr(args, "gen_classifier") else model)
        define.init_params(network, args)
        if not checkattr(args, "fromp"):
            make_optimizer(network, args)
    configure_continual_learning(model, args, config)
    generator = separate_generator(args, config, device, depth)
    print(f"classifier: {model.label}, {sum(p.numel() for p in model.parameters())} parameters", flush=True)

    # with visdom and plots off (the original's command) only the loss callbacks report anything
    feedback = checkattr(args, "feedback")
    generator_loss_cbs = [cb._VAE_loss_cb(
        log=args.loss_log, visdom=None, replay=args.replay != "none", model=model if feedback else generator,
        contexts=args.contexts, iters_per_context=args.iters if feedback else args.g_iters,
    )] if generator is not None or feedback else [None]
    if feedback:
        loss_cbs = generator_loss_cbs
    elif checkattr(args, "gen_classifier"):
        loss_cbs = [cb._gen_classifier_loss_cb(log=args.loss_log, classes=config["classes"], visdom=None)]
    else:
        loss_cbs = [cb._classifier_loss_cb(log=args.loss_log, visdom=None, model=model, contexts=args.contexts,
                                           iters_per_context=args.iters)]
    baseline = "joint" if checkattr(args, "joint") else ("cummulative" if checkattr(args, "cummulative") else "none")
    train_fn = (train_task_based.train_fromp if checkattr(args, "fromp") else
                train_task_based.train_gen_classifier if checkattr(args, "gen_classifier") else
                train_task_based.train_cl)
    start = time.time()
    train_fn(model, train_datasets, iters=args.iters, batch_size=args.batch, baseline=baseline,
             sample_cbs=[None], eval_cbs=[None], loss_cbs=loss_cbs, context_cbs=[None],
             generator=generator, gen_iters=getattr(args, "g_iters", args.iters), gen_loss_cbs=generator_loss_cbs)
    print(f"Total training time = {time.time() - start:.1f} seconds", flush=True)
    if checkattr(args, "gen_classifier"):
        model.S = args.eval_s
    return model, extractor


def label(model, extractor, images: np.ndarray) -> np.ndarray:
    """Every image's digit, as test_acc classifies: model.classify over all classes, the top score, in eval mode."""
    if model.label == "SeparateClassifiers" or getattr(model, "mask_dict", None) is not None:
        sys.exit("train.py: separate networks and XdG need each image's context, which the class scenario does not "
                 "give (the repository's check_for_errors refuses them outside the task scenario)")
    device = model._device()
    model.eval()
    predictions = []
    for x, _ in DataLoader(ScoredImages(images), batch_size=SCORE_BATCH, shuffle=False):
        with torch.no_grad():
            x = x.to(device)
            if extractor is not None:
                x = extractor(x)
            scores = model.classify(x, allowed_classes=None)
        _, predicted = torch.max(scores.cpu(), 1)
        if model.prototypes and max(predicted).item() >= model.classes:
            predicted = predicted % model.classes
        predictions.append(predicted.numpy())
    return np.concatenate(predictions).astype(np.int64)


def save(model, extractor) -> None:
    """The trained classifier (and feature extractor), pickled without the optimizers of its networks."""
    put_back = [(module, {key: module.__dict__.pop(key) for key in TRAINING_ONLY if key in module.__dict__})
                for module in model.modules()]
    CHECKPOINT.parent.mkdir(exist_ok=True)
    try:
        torch.save({"model": model, "extractor": extractor}, CHECKPOINT)
    except Exception as exc:  # noqa: BLE001  (whatever pickling raises, the test run could not restore the model)
        sys.exit(f"train.py: cannot save the trained model ({type(exc).__name__}: {exc}); the test run restores it "
                 "from model_checkpoint/, so its attributes must be picklable")
    finally:
        for module, attributes in put_back:
            module.__dict__.update(attributes)


def main() -> None:
    run = harness_args()
    if run.out is None:
        sys.exit("train.py: --out is required")
    run.out.mkdir(parents=True, exist_ok=True)
    if run.scale == "smoke":
        torch.set_num_threads(1)  # so small a network gains nothing from a second thread, which spins on a busy CPU
    if run.split == "test":
        if not CHECKPOINT.is_file():
            sys.exit(f"train.py: no {CHECKPOINT}: the test run needs the val run's trained model")
        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        saved = torch.load(CHECKPOINT, map_location=device, weights_only=False)
        scored = np.load(run.out / "test_images.npy")
        np.save(run.out / "predictions.npy", label(saved["model"], saved["extractor"], scored))
        print(f"{len(scored)} test images labelled", flush=True)
        return
    args = handle_inputs(run.scale)
    device = torch.device("cuda" if torch.cuda.is_available() and args.gpu else "cpu")
    print(f"device: {device}; iters per context: {args.iters}, batch: {args.batch}, lr: {args.lr}", flush=True)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    if device.type == "cuda":
        torch.cuda.manual_seed(args.seed)
    data.available.AVAILABLE_DATASETS["MNIST"] = HarnessMNIST
    model, extractor = train(args, device)
    save(model, extractor)
    scored = np.load(DATA / "val_images.npy")
    np.save(run.out / "predictions.npy", label(model, extractor, scored))
    print(f"{len(scored)} val images labelled", flush=True)


if __name__ == "__main__":
    main()
