"""Which environment is which: shared by the data recipe and the evaluator (kept free of heavy imports)."""

COLOR_FLIP = (0.1, 0.2, 0.9)  # DomainBed's ColoredMNIST environments '+90%', '+80%', '-90%'
TEST_ENV = 2
TRAIN_ENVS = tuple(e for e in range(len(COLOR_FLIP)) if e != TEST_ENV)
NUM_CLASSES = 2
