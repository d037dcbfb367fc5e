"""OpenML's Adult (data set 1590, version 2; file 1595261, ``adult.arff``), the file scikit-learn's
``fetch_openml("adult", version=2)`` downloads: read into the frame that call returns, and a fixture.

The file is ARFF: ``@attribute`` lines (14 features and the target ``class``; ``numeric`` or a nominal set
in braces), then ``@data`` with one comma-separated row per person, ``?`` for a missing value. scikit-learn's
pandas parser (its default for a dense file) reads the rows with ``pandas.read_csv``: nominal columns as
``category`` (their categories the values seen, sorted, not the header's order), numeric columns as
inferred (int64 here), ``?`` and nothing else as missing. :func:`read` builds the same frame, so that the
one-hot columns an original script derives from it (``pandas.get_dummies(..., drop_first=True)``) are the
original's, in the original's order.
"""

from __future__ import annotations

import io
import re
from pathlib import Path

import numpy as np
import pandas as pd

TARGET = "class"
POSITIVE = ">50K"

# the header of OpenML's adult.arff: each attribute and, for a nominal one, its declared values
ATTRIBUTES: list[tuple[str, tuple[str, ...] | None]] = [
    ("age", None),
    ("workclass", ("Private", "Self-emp-not-inc", "Self-emp-inc", "Federal-gov", "Local-gov", "State-gov",
                   "Without-pay", "Never-worked")),
    ("fnlwgt", None),
    ("education", ("Bachelors", "Some-college", "11th", "HS-grad", "Prof-school", "Assoc-acdm", "Assoc-voc", "9th",
                   "7th-8th", "12th", "Masters", "1st-4th", "10th", "Doctorate", "5th-6th", "Preschool")),
    ("education-num", None),
    ("marital-status", ("Married-civ-spouse", "Divorced", "Never-married", "Separated", "Widowed",
                        "Married-spouse-absent", "Married-AF-spouse")),
    ("occupation", ("Tech-support", "Craft-repair", "Other-service", "Sales", "Exec-managerial", "Prof-specialty",
                    "Handlers-cleaners", "Machine-op-inspct", "Adm-clerical", "Farming-fishing", "Transport-moving",
                    "Priv-house-serv", "Protective-serv", "Armed-Forces")),
    ("relationship", ("Wife", "Own-child", "Husband", "Not-in-family", "Other-relative", "Unmarried")),
    ("race", ("White", "Asian-Pac-Islander", "Amer-Indian-Eskimo", "Other", "Black")),
    ("sex", ("Female", "Male")),
    ("capital-gain", None),
    ("capital-loss", None),
    ("hours-per-week", None),
    ("native-country", ("United-States", "Cambodia", "England", "Puerto-Rico", "Canada", "Germany",
                        "Outlying-US(Guam-USVI-etc)", "India", "Japan", "Greece", "South", "China", "Cuba", "Iran",
                        "Honduras", "Philippines", "Italy", "Poland", "Jamaica", "Vietnam", "Mexico", "Portugal",
                        "Ireland", "France", "Dominican-Republic", "Laos", "Ecuador", "Taiwan", "Haiti", "Columbia",
                        "Hungary", "Guatemala", "Nicaragua", "Scotland", "Thailand", "Yugoslavia", "El-Salvador",
                        "Trinadad&Tobago", "Peru", "Hong", "Holand-Netherlands")),
    (TARGET, (">50K", "<=50K")),
]

_ATTRIBUTE = re.compile(r"^@attribute\s+('(?P<quoted>[^']*)'|(?P<plain>\S+))\s+(?P<kind>.+?)\s*$", re.IGNORECASE)
_QUOTED_CATEGORY = re.compile(r"^'(?P<inner>.*)'$")

# the fixture: enough rows for the hidden test, a stratified val cut and a classifier's few iterations
FIXTURE_ROWS = 600


def _header(lines: list[str], source: str) -> tuple[list[tuple[str, bool]], int]:
    """((name, is_nominal) per attribute, the index of the first data line)."""
    columns: list[tuple[str, bool]] = []
    for number, line in enumerate(lines):
        text = line.strip()
        if not text or text.startswith("%"):
            continue
        lowered = text.lower()
        if lowered.startswith("@data"):
            return columns, number + 1
        if lowered.startswith("@attribute"):
            match = _ATTRIBUTE.match(text)
            if match is None:
                raise ValueError(f"{source}: line {number + 1} is not an ARFF attribute: {text[:80]!r}")
            name = match.group("quoted") if match.group("quoted") is not None else match.group("plain")
            columns.append((name, match.group("kind").startswith("{")))
    raise ValueError(f"{source}: no @data section")


def read(path: Path) -> tuple[pd.DataFrame, pd.Series]:
    """``(X, y)`` as ``fetch_openml("adult", version=2, as_frame=True, parser="auto")`` returns them: the 14
    features (nominal ones categorical, numeric ones int64 or float64, ``?`` missing) and the ``class`` target."""
    text = Path(path).read_text(encoding="utf-8")
    lines = text.splitlines()
    columns, first_row = _header(lines, Path(path).name)
    expected = [name for name, _ in ATTRIBUTES]
    if [name for name, _ in columns] != expected:
        raise ValueError(f"{Path(path).name}: attributes {[name for name, _ in columns]} are not Adult's {expected}")
    nominal = {position: "category" for position, (_, is_nominal) in enumerate(columns) if is_nominal}
    frame = pd.read_csv(io.StringIO("\n".join(lines[first_row:])), header=None, index_col=False, na_values=["?"],
                        keep_default_na=False, comment="%", quotechar='"', skipinitialspace=True, escapechar="\\",
                        dtype=nominal)
    if frame.shape[1] != len(columns):
        raise ValueError(f"{Path(path).name}: rows have {frame.shape[1]} fields, the header declares {len(columns)}")
    frame.columns = expected
    for position in nominal:
        name = expected[position]
        frame[name] = frame[name].cat.rename_categories(
            lambda value: _QUOTED_CATEGORY.sub(r"\g<inner>", value) if isinstance(value, str) else value)
    return frame.drop(columns=[TARGET]), frame[TARGET]


def _arff_value(value) -> str:
    return "?" if value is None else str(value)


def write_fixture(path: Path) -> None:
    """A small ``adult.arff`` in OpenML's layout (the same header, rows drawn at random, some values missing),
    deterministic. Income depends on education, hours, marriage and sex, so a classifier has something to find
    and its selection rates differ between the sexes, as on Adult."""
    rng = np.random.default_rng(1590)
    declared = dict(ATTRIBUTES)
    rows = []
    for _ in range(FIXTURE_ROWS):
        male = rng.random() < 0.67
        age = int(rng.integers(17, 80))
        education_num = int(rng.integers(3, 17))
        married = rng.random() < (0.55 if male else 0.25)
        hours = int(np.clip(rng.normal(42 if male else 36, 10), 5, 90))
        gain = int(rng.choice([0, 0, 0, 0, 0, 0, 0, 0, 2174, 7688, 15024]))
        logit = -6.0 + 0.3 * education_num + 1.6 * married + 0.04 * (hours - 40) + 0.5 * male + 2.5 * (gain > 5000)
        rich = rng.random() < 1 / (1 + np.exp(-logit))

        def pick(name: str, missing: float = 0.0):
            return None if rng.random() < missing else str(rng.choice(declared[name]))

        relationship = ("Husband" if male else "Wife") if married else str(
            rng.choice(["Own-child", "Not-in-family", "Other-relative", "Unmarried"]))
        rows.append([age, pick("workclass", 0.05), int(rng.integers(20_000, 500_000)), pick("education"),
                     education_num, "Married-civ-spouse" if married else str(
                         rng.choice(["Divorced", "Never-married", "Separated", "Widowed"])),
                     pick("occupation", 0.05), relationship, pick("race"), "Male" if male else "Female", gain,
                     int(rng.choice([0, 0, 0, 0, 1902])), hours,
                     "United-States" if rng.random() < 0.9 else pick("native-country", 0.2),
                     ">50K" if rich else "<=50K"])
    header = ["@relation adult", ""]
    for name, values in ATTRIBUTES:
        header.append(f"@attribute {name} " + ("numeric" if values is None else "{ " + ", ".join(values) + " }"))
    body = [", ".join(_arff_value(value) for value in row) for row in rows]
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text("\n".join(header + ["", "@data"] + body) + "\n", encoding="utf-8")
    tmp.replace(path)
