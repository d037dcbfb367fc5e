"""The method's augmentations (editable): the two views pre-training compares.

Baseline, as in FML-bench's Representation_Learning_lightly: MoCo v2's augmentations (SimCLR's with weaker
colour jitter and a larger minimum crop), each view independently: random resized crop (scale 0.2 to 1),
horizontal flip, colour jitter (brightness, contrast, saturation 0.4, hue 0.1) with probability 0.8,
grayscale with probability 0.2, Gaussian blur, then ImageNet normalisation. Vertical flips and rotations are
off by default.

train.py builds EvolvingTransform(input_size=32, gaussian_blur=0.0) (keep that signature; CIFAR's images are
too small to blur) and calls it on each training image (a 32x32 PIL image); whatever list it returns is the
first element of every batch model.EvolvingModel.training_step receives. The linear probe does not use it.
"""

from typing import Dict, List, Optional, Tuple, Union

from lightly.transforms.gaussian_blur import GaussianBlur
from lightly.transforms.multi_view_transform import MultiViewTransform
from lightly.transforms.rotation import random_rotation_transform
from lightly.transforms.torchvision_v2_compatibility import torchvision_transforms as T
from lightly.transforms.utils import IMAGENET_NORMALIZE


class EvolvingTransform(MultiViewTransform):
    """Two views of an image, each through the same random pipeline."""

    def __init__(
        self,
        input_size: int = 224,
        cj_prob: float = 0.8,
        cj_strength: float = 1.0,
        cj_bright: float = 0.4,
        cj_contrast: float = 0.4,
        cj_sat: float = 0.4,
        cj_hue: float = 0.1,
        min_scale: float = 0.2,
        random_gray_scale: float = 0.2,
        gaussian_blur: float = 0.5,
        sigmas: Tuple[float, float] = (0.1, 2),
        vf_prob: float = 0.0,
        hf_prob: float = 0.5,
        rr_prob: float = 0.0,
        rr_degrees: Optional[Union[float, Tuple[float, float]]] = None,
        normalize: Optional[Dict[str, List[float]]] = IMAGENET_NORMALIZE,
    ):
        jitter = T.ColorJitter(brightness=cj_strength * cj_bright, contrast=cj_strength * cj_contrast,
                               saturation=cj_strength * cj_sat, hue=cj_strength * cj_hue)
        steps = [
            T.RandomResizedCrop(size=input_size, scale=(min_scale, 1.0)),
            T.RandomHorizontalFlip(p=hf_prob),
            T.RandomVerticalFlip(p=vf_prob),
            random_rotation_transform(rr_prob=rr_prob, rr_degrees=rr_degrees),
            T.RandomApply([jitter], p=cj_prob),
            T.RandomGrayscale(p=random_gray_scale),
            GaussianBlur(sigmas=sigmas, prob=gaussian_blur),
            T.ToTensor(),
        ]
        if normalize:
            steps.append(T.Normalize(mean=normalize["mean"], std=normalize["std"]))
        view = T.Compose(steps)
        super().__init__(transforms=[view, view])
