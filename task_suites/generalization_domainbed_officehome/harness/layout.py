"""Which domain is which: shared by the data recipe and the evaluator (kept free of heavy imports)."""

ENVIRONMENTS = ("Art", "Clipart", "Product", "RealWorld")  # DomainBed's OfficeHome order: A, C, P, R
TEST_ENV = 0
TRAIN_ENVS = tuple(e for e in range(len(ENVIRONMENTS)) if e != TEST_ENV)
NUM_CLASSES = 10
