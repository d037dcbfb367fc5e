"""Which environment is which: shared by the data recipe and the evaluator (kept free of heavy imports)."""

COLOR_FLIP = (0.1, 0.2, 0.9)  # DomainBed's ColoredMNIST environments '+90%', '+80%', '-90%'
TEST_ENV = 2
TRAIN_ENVS = tuple(e for e in range(len(COLOR_FLIP)) if e != TEST_ENV)
NUM_CLASSES = 2
# the share of the held-out environment's digits whose images form the validation split (the original's
# holdout_fraction: DomainBed's test-domain "oracle" selection); the rest is the hidden test split
VAL_FRACTION = 0.3
