"""Default hyper-parameters: DomainBed's defaults for ERM on small (MNIST) and large (224 x 224) images."""

SMALL_IMAGES = ["ColoredMNIST", "RotatedMNIST"]


def default_hparams(algorithm, dataset):
    small = dataset in SMALL_IMAGES
    return {"data_augmentation": True, "resnet18": False, "nonlinear_classifier": False, "class_balanced": False,
            "lr": 1e-3 if small else 5e-5, "weight_decay": 0.0, "batch_size": 64 if small else 32}
