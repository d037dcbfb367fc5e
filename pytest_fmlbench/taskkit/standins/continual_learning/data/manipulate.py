"""A data set restricted to some labels."""

from torch.utils.data import Dataset


class SubDataset(Dataset):
    def __init__(self, original_dataset, sub_labels, target_transform=None):
        super().__init__()
        self.dataset = original_dataset
        wanted = set(int(label) for label in sub_labels)
        self.sub_indeces = [i for i, label in enumerate(original_dataset.targets) if int(label) in wanted]
        self.target_transform = target_transform

    def __len__(self):
        return len(self.sub_indeces)

    def __getitem__(self, index):
        image, target = self.dataset[self.sub_indeces[index]]
        return image, self.target_transform(target) if self.target_transform else target
