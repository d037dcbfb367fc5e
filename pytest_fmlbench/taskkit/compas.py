"""ProPublica's COMPAS two-year recidivism file (``compas-scores-two-years.csv``, from propublica/compas-analysis)
as AIF360 reads it, with AIF360's own code from a verified checkout; and a fixture in the file's format.

AIF360's ``CompasDataset`` reads the file from inside its package (``aif360/data/raw/compas/``), and
``load_preproc_data_compas`` (``aif360/algorithms/preprocessing/optim_preproc_helpers``) filters and encodes it:
ProPublica's screening-window filters, African-American and Caucasian defendants only, age group, priors and
charge degree one-hot, sex (1: Female, the privileged group) and race (1: Caucasian) as protected attributes and
features, label ``two_year_recid`` with 0 (no recidivism) favorable. :func:`aif360_from` imports that package
from a scratch copy of the checkout (the cache's checkout is never written) with the file put where
``CompasDataset`` looks; :func:`original_splits` runs the preprocessing and cuts the result as FML-bench's
Fairness_and_Bias_aif360 does.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import random
import shutil
import sys
import tempfile
from pathlib import Path
from types import ModuleType
from typing import Iterator

import numpy as np
import pandas as pd

LABEL = "two_year_recid"
PROTECTED = ("sex", "race")
FAVORABLE, UNFAVORABLE = 0.0, 1.0
IN_PACKAGE = ("data", "raw", "compas", "compas-scores-two-years.csv")
# the original's set_seed(233) before it loads and splits (train 70%, then the rest 30% val / 70% test)
SEED = 233
TRAIN_FRACTION, VAL_FRACTION_OF_REST = 0.7, 0.3

# ProPublica's header, in its order (pandas reads the two repeated names as decile_score.1 and priors_count.1)
HEADER = ("id,name,first,last,compas_screening_date,sex,dob,age,age_cat,race,juv_fel_count,decile_score,"
          "juv_misd_count,juv_other_count,priors_count,days_b_screening_arrest,c_jail_in,c_jail_out,c_case_number,"
          "c_offense_date,c_arrest_date,c_days_from_compas,c_charge_degree,c_charge_desc,is_recid,r_case_number,"
          "r_charge_degree,r_days_from_arrest,r_offense_date,r_charge_desc,r_jail_in,r_jail_out,violent_recid,"
          "is_violent_recid,vr_case_number,vr_charge_degree,vr_offense_date,vr_charge_desc,type_of_assessment,"
          "decile_score,score_text,screening_date,v_type_of_assessment,v_decile_score,v_score_text,"
          "v_screening_date,in_custody,out_custody,priors_count,start,end,event,two_year_recid")
# the fixture: enough rows left after AIF360's filters for every split and a few training batches
FIXTURE_ROWS = 700


@contextlib.contextmanager
def aif360_from(checkout: Path, compas_csv: Path | None = None, without: tuple[str, ...] = ("tensorflow",)
                ) -> Iterator[ModuleType]:
    """AIF360's ``aif360`` package as the checkout holds it, imported from a scratch copy (with ``compas_csv``
    where ``CompasDataset`` reads it); any other ``aif360`` already imported (the installed one) is set aside
    for the duration and restored after. The modules in ``without`` cannot be imported meanwhile: the harness
    never trains, and AIF360 imports TensorFlow only for AdversarialDebiasing, under a try that lets it go
    (its metrics import that module, through the in-processing package), which spares each harness command
    TensorFlow's start-up."""
    package = Path(checkout) / "aif360"
    if not (package / "__init__.py").is_file():
        raise SystemExit(f"compas: the AIF360 checkout {checkout} has no aif360 package")
    with tempfile.TemporaryDirectory(prefix="fmlbench-aif360-") as scratch:
        copy = Path(scratch) / "aif360"
        shutil.copytree(package, copy, ignore=shutil.ignore_patterns("aif360-r", "__pycache__", "*.pyc"))
        if compas_csv is not None:
            copy.joinpath(*IN_PACKAGE).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(compas_csv, copy.joinpath(*IN_PACKAGE))
        saved = _take_aif360_modules()
        blocked = [name for name in without if name not in sys.modules]
        sys.modules.update(dict.fromkeys(blocked))  # a None entry makes `import name` raise ImportError
        sys.path.insert(0, scratch)
        dont_write = sys.dont_write_bytecode
        sys.dont_write_bytecode = True
        # AIF360 warns at import of every optional extra it misses (TensorFlow, inFairness): none is used here
        logging.disable(logging.WARNING)
        try:
            module = importlib.import_module("aif360")
            if Path(module.__file__).resolve().parent != copy.resolve():
                raise SystemExit(f"compas: imported aif360 from {module.__file__}, not from the checkout's copy")
            yield module
        finally:
            logging.disable(logging.NOTSET)
            sys.dont_write_bytecode = dont_write
            sys.path.remove(scratch)
            for name in blocked:
                del sys.modules[name]
            _take_aif360_modules()
            sys.modules.update(saved)


def _take_aif360_modules() -> dict[str, ModuleType]:
    taken = {name: module for name, module in sys.modules.items() if name == "aif360" or name.startswith("aif360.")}
    for name in taken:
        del sys.modules[name]
    return taken


def frame(dataset) -> pd.DataFrame:
    """An AIF360 BinaryLabelDataset as a table: its features (named, in order) and its label, indexed by id."""
    table = pd.DataFrame(dataset.features, columns=list(dataset.feature_names),
                         index=pd.Index(list(dataset.instance_names), name="id"))
    table[LABEL] = dataset.labels.ravel()
    return table


def original_splits(checkout: Path, compas_csv: Path) -> tuple[dict[str, pd.DataFrame], tuple[int, int]]:
    """``({"train", "val", "test": table}, (rows, rows after train))``: the original's steps with AIF360's code
    from ``checkout``: set_seed(233), load_preproc_data_compas(), split([0.7], shuffle=True) into train and the
    rest, the rest split([0.3], shuffle=True) into val and test. The two sizes are those of the two shuffles,
    which draw from NumPy's global generator before the original trains (its training continues that stream)."""
    with aif360_from(checkout, compas_csv):
        preprocessing = importlib.import_module(
            "aif360.algorithms.preprocessing.optim_preproc_helpers.data_preproc_functions")
        random.seed(SEED)
        np.random.seed(SEED)
        dataset = preprocessing.load_preproc_data_compas()
        train, rest = dataset.split([TRAIN_FRACTION], shuffle=True)
        val, test = rest.split([VAL_FRACTION_OF_REST], shuffle=True)
        if list(dataset.protected_attribute_names) != list(PROTECTED) or list(dataset.label_names) != [LABEL] \
                or (dataset.favorable_label, dataset.unfavorable_label) != (FAVORABLE, UNFAVORABLE):
            raise SystemExit("compas: AIF360's preprocessed COMPAS is not laid out as this task expects")
        return {"train": frame(train), "val": frame(val), "test": frame(test)}, (len(dataset.labels), len(rest.labels))


def write_fixture(path: Path) -> None:
    """A small ``compas-scores-two-years.csv`` in ProPublica's layout (its 53 columns, those AIF360 reads filled,
    the rest empty; some rows outside the screening window or of other races, as in the real file),
    deterministic. Recidivism depends on priors and age, and differs between the sexes."""
    rng = np.random.default_rng(2016)
    columns = HEADER.split(",")
    rows = []
    for number in range(1, FIXTURE_ROWS + 1):
        female = rng.random() < 0.2
        age = int(rng.integers(18, 70))
        priors = int(rng.choice([0, 0, 0, 1, 2, 3, 4, 6, 9, 15]))
        degree = str(rng.choice(["F", "F", "M"]))
        race = str(rng.choice(["African-American", "Caucasian", "African-American", "Caucasian", "Hispanic",
                               "Other"]))
        recid = int(rng.random() < 1 / (1 + np.exp(-(-0.6 + 0.18 * priors - 0.03 * (age - 35) - 0.5 * female))))
        decile = int(np.clip(1 + priors // 2 + (age < 25) * 3 + rng.integers(0, 3), 1, 10))
        jail_in = pd.Timestamp("2013-01-01") + pd.Timedelta(days=int(rng.integers(0, 700)), hours=3)
        jail_out = jail_in + pd.Timedelta(days=int(rng.choice([0, 1, 3, 12, 40, 150])), hours=5)
        values = {
            "id": number, "name": f"person {number}", "first": "person", "last": str(number),
            "sex": "Female" if female else "Male", "age": age,
            "age_cat": "Less than 25" if age < 25 else ("Greater than 45" if age > 45 else "25 - 45"),
            "race": race, "juv_fel_count": 0, "decile_score": decile, "juv_misd_count": 0, "juv_other_count": 0,
            "priors_count": priors, "days_b_screening_arrest": int(rng.choice([-1, -1, 0, 1, -5, 45, -60])),
            "c_jail_in": jail_in.strftime("%Y-%m-%d %H:%M:%S"), "c_jail_out": jail_out.strftime("%Y-%m-%d %H:%M:%S"),
            "c_charge_degree": degree, "c_charge_desc": "Battery" if degree == "M" else "Grand Theft",
            "is_recid": recid if rng.random() > 0.02 else -1, "type_of_assessment": "Risk of Recidivism",
            "score_text": "Low" if decile <= 4 else ("Medium" if decile <= 7 else "High"),
            "two_year_recid": recid,
        }
        row = [str(values.get(name, "")) for name in columns]
        row[columns.index("decile_score", columns.index("decile_score") + 1)] = str(decile)
        row[columns.index("priors_count", columns.index("priors_count") + 1)] = str(priors)
        rows.append(",".join(row))
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text("\n".join([HEADER, *rows]) + "\n", encoding="utf-8")
    tmp.replace(path)
