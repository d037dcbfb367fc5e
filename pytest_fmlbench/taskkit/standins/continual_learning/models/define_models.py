"""Building and initialising the classifier."""

from models.classifier import Classifier


def define_classifier(args, config, device, depth=0, **kwargs):
    return Classifier(image_size=config["size"], image_channels=config["channels"], classes=config["output_units"],
                      fc_layers=args.fc_lay, fc_units=args.fc_units).to(device)


def init_params(model, args, verbose=False):
    for module in model.modules():
        if hasattr(module, "reset_parameters"):
            module.reset_parameters()
