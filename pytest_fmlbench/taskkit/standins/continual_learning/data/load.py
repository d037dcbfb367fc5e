"""Split MNIST's contexts: consecutive pairs of digits, each context a SubDataset of the train or test set."""

from torchvision import transforms

from data import available
from data.manipulate import SubDataset


def get_dataset(name, type="train", dir="./store/datasets", target_transform=None, verbose=False):
    dataset = available.AVAILABLE_DATASETS[name](
        f"{dir}/{name}", train=type != "test", download=False,
        transform=transforms.Compose(available.AVAILABLE_TRANSFORMS[name]), target_transform=target_transform)
    if verbose:
        print(f" --> {name}: '{type}'-dataset consisting of {len(dataset)} samples")
    return dataset


def get_context_set(name, scenario, contexts, data_dir="./datasets", verbose=False, exception=False,
                    singlehead=False, train_set_per_class=False, **kwargs):
    if name != "splitMNIST" or scenario != "class":
        raise ValueError(f"the stand-in knows split MNIST's class scenario only, not {name}/{scenario}")
    config = dict(available.DATASET_CONFIGS["MNIST"])
    per_context = config["classes"] // contexts
    config.update(classes_per_context=per_context, output_units=per_context * contexts, normalize=False)
    sets = []
    for part in ("train", "test"):
        full = get_dataset("MNIST", type=part, dir=data_dir, verbose=verbose)
        sets.append([SubDataset(full, range(per_context * c, per_context * (c + 1))) for c in range(contexts)])
    return tuple(sets), config
