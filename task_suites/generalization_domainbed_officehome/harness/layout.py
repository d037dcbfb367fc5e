"""Which domain is which, and Art's two parts: shared by the data recipe and the evaluator (no heavy imports)."""

ENVIRONMENTS = ("Art", "Clipart", "Product", "RealWorld")  # DomainBed's OfficeHome order: A, C, P, R
TEST_ENV = 0
TRAIN_ENVS = tuple(e for e in range(len(ENVIRONMENTS)) if e != TEST_ENV)
NUM_CLASSES = 10
# Art's digits are cut in two disjoint parts: validation (DomainBed's test-domain, "oracle", selection, as
# the original task validated) and the hidden test
ART_VAL, ART_TEST = "ArtVal", "ArtTest"
