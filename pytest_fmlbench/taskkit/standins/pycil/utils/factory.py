"""Learners by name."""


def get_model(model_name, args):
    if model_name.lower() == "icarl":
        from models.icarl import iCaRL
        return iCaRL(args)
    raise NotImplementedError(f"Unknown model {model_name}")
