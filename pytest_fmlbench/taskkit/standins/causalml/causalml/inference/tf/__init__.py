from .dragonnet import DragonNet

__all__ = ["DragonNet"]
