"""The task specification: ``task_suites/<task_id>/task.yaml`` as a typed model.

A task folder holds:

* ``task.yaml``   - this spec;
* ``workspace/``  - the baseline code the agent works on (editable + protected files);
* ``harness/``    - protected code the agent never gets a copy of: data preparation and the evaluator.

Commands are format strings. Placeholders: ``{python}`` (the interpreter running pytest),
``{workspace}``, ``{harness}``, ``{split}`` (``val`` or ``test``), ``{out}`` (where the experiment
writes its artefacts), ``{private}`` (harness-only data: labels the experiment never loads),
``{result}`` (where the evaluator writes its JSON verdict), ``{scale}`` (``full``, or ``smoke`` under
``--scale=smoke``) and, for harness commands only, ``{data}`` (the data cache's folder for the scale:
where ``fmlbench data fetch`` put the task's declared artefacts).

A ``full``-profile task lives in a ``full/`` folder inside its ``small`` task's folder, with the id
``<small id>_full``; it declares its artefacts (``data``), the original task it reproduces
(``original``), the GPUs and GPU memory one run needs, and where its baseline values come from
(``baseline.source``: measured, paper or unmeasured, the last with no values and so no NI). A
``baseline_measured.yaml`` beside its task.yaml (written by ``fmlbench baseline --measure``) replaces the
declared values with measured ones, the declared paper values kept beside them (``baseline.paper``).
"""

from __future__ import annotations

import hashlib
import math
import re
import string
from datetime import date
from fnmatch import fnmatch
from functools import cached_property
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator, model_validator

from .datacache.artifact import Artifact
from .isolation import package_data

TASK_FILE = "task.yaml"
_MODULE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")
PLACEHOLDERS = {"python", "workspace", "harness", "split", "out", "private", "result", "scale", "data"}
# only the pristine harness sees these: the experiment's sandbox has none of them
HARNESS_ONLY = {"harness", "private", "result", "data"}
FULL_FOLDER = "full"
# beside a full task's task.yaml: the baseline as `fmlbench baseline --measure` measured it (replaces the declared)
MEASURED_BASELINE_FILE = "baseline_measured.yaml"
# pristine helpers shared by the tasks: harnesses import them, workspaces receive copies (``kit``)
TASKKIT = Path(__file__).resolve().with_name("taskkit")


class TaskSpecError(Exception):
    """A task.yaml that cannot be used; the message is one line naming file, field and problem."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Metric(_Strict):
    key: str = Field(description="key in the evaluator's per-dataset 'means'")
    direction: Literal["higher", "lower"] = Field(description="which raw value is better (the agent's view)")
    transform: Literal["none", "neg_log10"] = Field(
        "none", description="the scale the tables score on: neg_log10 scores -log10(value) (e.g. a KS-test "
        "p-value), which flips the better direction; baseline values stay raw, normalization bounds are on "
        "the scored scale")

    def better(self, a: float, b: float) -> bool:
        """Whether ``a`` is strictly better than ``b``."""
        return a > b if self.direction == "higher" else a < b


class BaselineTolerance(_Strict):
    """How far a run of the unchanged baseline may land from the declared values on another machine."""

    val: float = Field(ge=0)
    test: float = Field(ge=0)


class PaperBaseline(_Strict):
    """The original FML-bench's published baseline values for the setting a task reproduces."""

    val: float
    test: float


class Baseline(_Strict):
    val: float | None = Field(None, description="the baseline's validation value; absent only while unmeasured")
    test: float | None = Field(None, description="the baseline's test value; absent only while unmeasured")
    tolerance: BaselineTolerance | None = Field(
        None, description="how far the baseline's run may land from these values on a CPU other than the one "
        "that measured them (kernels round differently from one instruction set to the next, and training "
        "amplifies it), measured by scripts/baseline_spread.py; absent: every machine reproduces them exactly")
    source: Literal["measured", "paper", "unmeasured"] = Field(
        "measured", description="measured: this project's baseline produced these values (on 'hardware' for a "
        "full-profile task); paper: the original FML-bench's published values, declared as a reference and not "
        "yet reproduced here; unmeasured: no value applies yet (no NI until `fmlbench baseline --measure`)")
    hardware: str | None = Field(None, description="where measured values were measured (full profile)")
    measured_on: date | None = Field(None, description="the day `fmlbench baseline --measure` measured them")
    paper: PaperBaseline | None = Field(
        None, description="the original's published values, shown beside measured ones (a measured baseline "
        "keeps what task.yaml declared as source: paper here)")
    note: str | None = Field(None, description="where the values come from, said to readers as is")

    @model_validator(mode="after")
    def _source_explained(self) -> Baseline:
        if self.source in ("paper", "unmeasured") and not self.note:
            raise ValueError(f"{self.source} values need a note saying where they come from and why they are "
                             "not measured here")
        if self.source == "unmeasured" and (self.val is not None or self.test is not None):
            raise ValueError("an unmeasured baseline declares no val or test (they would be scored against)")
        if self.source != "unmeasured" and (self.val is None or self.test is None):
            raise ValueError(f"a {self.source} baseline needs val and test")
        return self

    @property
    def measured(self) -> bool:
        """Whether values apply (measured or the paper's): an unmeasured baseline has none to score against."""
        return self.source != "unmeasured"


class Normalization(_Strict):
    """NI bounds. ``worst`` may be the word ``baseline`` (the baseline test value)."""

    best: float
    worst: float | Literal["baseline"]

    def scale(self, baseline_test: float | None) -> float:
        """The NI range; NaN where it is bounded by a baseline that is unmeasured."""
        worst = baseline_test if self.worst == "baseline" else self.worst
        return math.nan if worst is None else abs(self.best - worst)


class Commands(_Strict):
    prepare: str = Field(description="harness: materialise data for a split (runs from pristine code)")
    val: str = Field(description="experiment on the validation split (imports editable files)")
    test: str = Field(description="experiment on the hidden test split")
    evaluate: str = Field(description="harness: compute metrics from the experiment's artefacts")

    @field_validator("*")
    @classmethod
    def _known_placeholders(cls, value: str) -> str:
        names = {name for _, name, _, _ in string.Formatter().parse(value) if name}
        unknown = names - PLACEHOLDERS
        if unknown:
            raise ValueError(f"unknown placeholder(s) {sorted(unknown)}; allowed: {sorted(PLACEHOLDERS)}")
        return value

    @field_validator("val", "test")
    @classmethod
    def _experiments_see_no_harness_paths(cls, value: str) -> str:
        # the experiment's sandbox has no harness, private folder or verdict: naming them is a task bug
        names = {name for _, name, _, _ in string.Formatter().parse(value) if name}
        leaked = names & HARNESS_ONLY
        if leaked:
            raise ValueError(f"an experiment command cannot use {sorted(leaked)}: only the harness sees those")
        return value


class Constraint(_Strict):
    name: str
    description: str


class Knob(_Strict):
    """One tunable hyper-parameter in the task's editable JSON config (for random search)."""

    type: Literal["float", "int", "choice"]
    low: float | None = None
    high: float | None = None
    log: bool = False
    values: list[str | int | float | bool] | None = None

    @model_validator(mode="after")
    def _range_or_values(self) -> Knob:
        if self.type == "choice":
            if not self.values:
                raise ValueError("a choice knob needs 'values'")
        else:
            if self.low is None or self.high is None or self.low > self.high:
                raise ValueError("a numeric knob needs low <= high")
            if self.log and self.low <= 0:
                raise ValueError("a log-scale knob needs low > 0")
        return self


class Knobs(_Strict):
    file: str = Field(description="editable JSON file holding the knobs as top-level keys")
    space: dict[str, Knob]


class Resources(_Strict):
    gpus: int = Field(0, ge=0, description="GPUs one run asks for (0: the original runs on CPUs; a small "
                      "task still uses the worker's GPU when there is one)")
    gpu_memory_gb: float | None = Field(None, gt=0, description="GPU memory one run needs (full profile)")
    cpus: int = Field(2, ge=1, description="CPU cores one run asks a cluster scheduler for (--slurm)")
    memory_mb: int | None = Field(
        None, gt=0, description="memory limit of one experiment (the whole step's processes); "
        "None: a default derived from the machine")
    max_processes: int = Field(
        1024, gt=0, description="limit on the processes and threads one experiment may have at once")


class Sandbox(_Strict):
    """What the experiment's sandbox hides beyond its defaults."""

    hide: list[str] = Field(
        [], description="data the task's splits are built from that ships inside an installed package, as "
        "'package:path/inside/it' (a file, or a folder whose non-code files are all hidden), e.g. "
        "'sklearn:datasets/data/digits.csv.gz'; unreadable inside the sandbox, readable by the harness")

    @field_validator("hide")
    @classmethod
    def _resource_syntax(cls, value: list[str]) -> list[str]:
        for text in value:
            try:
                package_data.Resource.parse(text)
            except package_data.ResourceError as exc:
                raise ValueError(str(exc)) from None
        return value


class Original(_Strict):
    """The original FML-bench task a full-profile task reproduces (``ml_tasks/<task>`` upstream)."""

    task: str = Field(description="the original's task name, e.g. Privacy_opacus")
    dataset: str = Field(description="the dataset key of the original's results file")
    pinned_commit: str | None = Field(None, description="the upstream repository's commit the original pins")


class UpstreamFiles(_Strict):
    """Files of a git artefact's checkout that every fresh workspace holds, at the same relative paths.

    The original's editable surface is often a file of the upstream repository itself (DomainBed's
    ``domainbed/algorithms.py``); it cannot ship in the task folder (it is that project's code), so the
    workspace receives it from the verified checkout in the data cache before the harness prepares data.
    """

    artifact: str = Field(description="the name of one of the task's git artefacts")
    paths: list[str] = Field(min_length=1, description="files or folders inside its checkout")

    @field_validator("paths")
    @classmethod
    def _relative_paths(cls, value: list[str]) -> list[str]:
        for path in value:
            p = Path(path)
            if not path or p.is_absolute() or ".." in p.parts or p.parts[0] == ".git":
                raise ValueError(f"{path!r} must be a relative path inside the checkout, outside .git")
        return value

    def covers(self, workspace_path: str) -> bool:
        """Whether ``workspace_path`` (a file or a glob) lies inside what this copy brings."""
        return any(workspace_path == p or workspace_path.startswith(p.rstrip("/") + "/") for p in self.paths)


class AuditLimits(_Strict):
    """What the audit's cheap signals compare a run with (see pytest_fmlbench.audit.signals)."""

    ceiling: float | None = Field(
        None, description="the best test value an honest method can plausibly reach, on the metric's raw scale "
        "(e.g. the Bayes-optimal accuracy plus sampling noise); a test value beyond it flags the run. "
        "Default: the normalization bound 'best'")
    usual_gap: float | None = Field(
        None, ge=0, description="how far test usually sits above validation, in units of the normalization "
        "range; a run whose test beats its validation by far more flags the run. Default: the baseline's own")


class TaskNoise(_Strict):
    """How much the task's test value moves when nothing better was done: what a comparison of two sessions
    must tell a real change from (``fmlbench compare``, ``--fmlbench-compare``). In the metric's raw units, or
    for a transformed metric on the scored scale (``scale: scored``)."""

    kernel_spread: float = Field(
        ge=0, description="the largest difference of the unchanged baseline's test value from one machine (CPU "
        "model, instruction set, GPU) to another, as scripts/baseline_spread.py measures it; 0: the same everywhere")
    seed_sd: float = Field(
        ge=0, description="the standard deviation of one run's test value over seeds, of a stochastic agent "
        "(random-search at its usual budget) on one machine")
    measured_on: str = Field(min_length=1, description="where and when: '<CPU or GPU>, <date>'")
    scale: Literal["metric", "scored"] = Field(
        "metric", description="the units of seed_sd and kernel_spread: the metric's raw units, or 'scored' for a "
        "transformed metric (metric.transform), the scale the tables score after the transform, where a spread "
        "of the raw value says little (a p-value's spread near 0 on -log10 p)")


class MeasuredBaseline(_Strict):
    """What `fmlbench baseline --measure` writes: the unchanged baseline's values, where and when."""

    val: float
    test: float
    hardware: str = Field(min_length=1, description="the GPUs (or CPU) and driver the run used")
    measured_on: date
    steps: int = Field(ge=0, description="the baseline agent's step budget in the measuring run")
    seed: int = 0
    run: str | None = Field(None, description="the measuring run's folder, for whoever wants its logs")

    def as_baseline(self, declared: dict) -> dict:
        """task.yaml's ``baseline`` mapping with these values in force and the paper's kept beside them."""
        paper = declared.get("paper")
        if declared.get("source") == "paper":
            paper = {"val": declared.get("val"), "test": declared.get("test")}
        return {"val": self.val, "test": self.test, "source": "measured", "hardware": self.hardware,
                "measured_on": self.measured_on, "paper": paper,
                "note": f"measured by `fmlbench baseline --measure` on {self.measured_on} ({self.hardware}); "
                        f"task.yaml declared: {declared.get('note') or declared.get('source', 'measured')}"}


class TaskSpec(_Strict):
    id: str = Field(pattern=r"^[a-z][a-z0-9_]*$")
    version: int = 1
    domain: str
    title: str
    description: str = Field(min_length=1, description="what the agent is told")
    profile: Literal["small", "full"]
    markers: list[str] = []
    editable: list[str] = Field(min_length=1)
    protected: list[str] = Field(min_length=1, description="globs under workspace/")
    commands: Commands
    metric: Metric
    baseline: Baseline
    normalization: Normalization
    constraints: list[Constraint] = []
    timeout_s: float = Field(gt=0)
    expected_duration_s: float | None = Field(
        None, gt=0, description="a baseline run's duration (val + test), for schedulers: on 2 CPU cores (small), "
        "on the declared GPUs (full)")
    knobs: Knobs | None = None
    resources: Resources = Resources()
    sandbox: Sandbox = Sandbox()
    original: Original | None = None
    data: list[Artifact] = Field([], description="artefacts fetched by `fmlbench data fetch` (full profile)")
    upstream: list[UpstreamFiles] = Field([], description="files of git artefacts copied into every fresh "
                                          "workspace (full profile)")
    kit: dict[str, str] = Field(
        {}, description="workspace files that are copies of shared code, as 'path: module': every fresh "
        "workspace receives pytest_fmlbench/taskkit/<module>.py at that path (the harness imports the same "
        "module), so the task folder keeps one source of it")
    audit: AuditLimits = AuditLimits()
    noise: TaskNoise | None = Field(None, description="the measured noise of the test value (compare's power)")
    warm: list[str] | None = Field(
        None, description="modules the experiments' warm parent imports before it forks each step "
        "(e.g. [numpy, pandas, sklearn.linear_model]); absent: the installed modules the baseline's "
        "files import; []: experiments start cold")

    @model_validator(mode="after")
    def _noise_on_a_scale_the_metric_has(self) -> TaskSpec:
        if self.noise is not None and self.noise.scale == "scored" and self.metric.transform == "none":
            raise ValueError("noise.scale: scored is for a transformed metric (metric.transform); this metric's "
                             "noise is in its own units (scale: metric)")
        return self

    @model_validator(mode="after")
    def _full_profile_declares_its_scale(self) -> TaskSpec:
        if self.profile != "full":
            if self.data or self.original or self.upstream:
                raise ValueError("'data', 'original' and 'upstream' belong to full-profile tasks")
            return self
        git = {a.name for a in self.data if a.kind == "git"}
        for copy in self.upstream:
            if copy.artifact not in git:
                raise ValueError(f"upstream: {copy.artifact!r} is not one of the task's git artefacts")
        # gpus: 0 is a declaration too: some originals (fairlearn, gCastle, CausalML) run on CPUs
        missing = [name for name, value in (
            ("original", self.original), ("resources.gpus", "gpus" in self.resources.model_fields_set),
            ("resources.gpu_memory_gb", self.resources.gpu_memory_gb or not self.resources.gpus),
            ("expected_duration_s", self.expected_duration_s)) if not value]
        if missing:
            raise ValueError(f"a full-profile task must declare {', '.join(missing)}")
        if self.resources.gpu_memory_gb and not self.resources.gpus:
            raise ValueError("resources.gpu_memory_gb is declared for a task that uses no GPU (gpus: 0)")
        if self.baseline.source == "measured" and not self.baseline.hardware:
            raise ValueError("measured full-profile baselines must name the hardware they were measured on")
        if len({a.name for a in self.data}) != len(self.data):
            raise ValueError("two artefacts share a name")
        return self

    @field_validator("warm")
    @classmethod
    def _module_names(cls, value: list[str] | None) -> list[str] | None:
        for name in value or ():
            if not _MODULE.match(name):
                raise ValueError(f"{name!r} is not a module name (e.g. 'sklearn.linear_model')")
        return value

    @field_validator("kit")
    @classmethod
    def _kit_modules(cls, value: dict[str, str]) -> dict[str, str]:
        for path, module in value.items():
            p = Path(path)
            if not path or p.is_absolute() or ".." in p.parts:
                raise ValueError(f"{path!r} must be a relative path inside the workspace")
            if not module.isidentifier() or not (TASKKIT / f"{module}.py").is_file():
                raise ValueError(f"{module!r} is not a module of pytest_fmlbench.taskkit")
        return value

    @field_validator("editable")
    @classmethod
    def _relative_paths(cls, value: list[str]) -> list[str]:
        for path in value:
            p = Path(path)
            if p.is_absolute() or ".." in p.parts:
                raise ValueError(f"{path!r} must be a relative path inside the workspace")
        return value

    @field_validator("normalization")
    @classmethod
    def _non_zero_range(cls, value: Normalization, info: ValidationInfo) -> Normalization:
        baseline, metric = info.data.get("baseline"), info.data.get("metric")
        if baseline is None:
            return value
        test = baseline.test
        if test is None:
            if value.worst == "baseline":
                raise ValueError("normalization.worst: baseline needs a baseline test value (this one is unmeasured)")
            test = value.worst
        elif metric is not None and metric.transform == "neg_log10":
            if test <= 0:
                raise ValueError("baseline.test must be > 0 for metric.transform neg_log10")
            test = -math.log10(test)
        if value.scale(test) == 0:
            raise ValueError("bounds give a zero range")
        return value

    @field_validator("knobs")
    @classmethod
    def _knobs_in_editable_file(cls, value: Knobs | None, info: ValidationInfo) -> Knobs | None:
        if value is not None and value.file not in info.data.get("editable", []):
            raise ValueError(f"knobs.file {value.file!r} is not an editable file")
        return value


class Task:
    """A loaded task: the spec plus where its folder is and a fingerprint of its contents."""

    def __init__(self, spec: TaskSpec, root: Path):
        self.spec = spec
        self.root = root

    @property
    def workspace_dir(self) -> Path:
        return self.root / "workspace"

    @property
    def harness_dir(self) -> Path:
        return self.root / "harness"

    @property
    def kit_files(self) -> dict[str, Path]:
        """Workspace path -> the taskkit source every fresh workspace receives there."""
        return {path: TASKKIT / f"{module}.py" for path, module in self.spec.kit.items()}

    @property
    def id(self) -> str:
        return self.spec.id

    @cached_property
    def fingerprint(self) -> str:
        """sha256 over the task's files as collected, so a changed task never reuses an old run."""
        files = {path.relative_to(self.root): path for path in self.root.rglob("*")
                 if path.is_file() and "__pycache__" not in path.parts}
        if self.spec.profile == "small":
            files = {rel: path for rel, path in files.items() if rel.parts[0] != FULL_FOLDER}  # a task of its own
        # the kit's copies count as the workspace files they become
        files.update({Path("workspace", rel): source for rel, source in self.kit_files.items()})
        digest = hashlib.sha256()
        for rel in sorted(files):
            digest.update(str(rel).encode())
            digest.update(hashlib.sha256(files[rel].read_bytes()).digest())
        return digest.hexdigest()


def _first_error(exc: ValidationError) -> str:
    err = exc.errors()[0]
    field = ".".join(str(part) for part in err["loc"]) or "(top level)"
    msg = err["msg"].removeprefix("Value error, ")
    more = f" (+{exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
    return f"field '{field}': {msg}{more}"


def _measured_baseline(path: Path) -> MeasuredBaseline:
    try:
        return MeasuredBaseline.model_validate(yaml.safe_load(path.read_text()))
    except yaml.YAMLError as exc:
        raise TaskSpecError(f"{path}: invalid YAML: {getattr(exc, 'problem', exc)}") from None
    except ValidationError as exc:
        raise TaskSpecError(f"{path}: {_first_error(exc)}") from None


def load_task(task_yaml: Path) -> Task:
    """Parse and validate one task.yaml; raise TaskSpecError with a one-line reason."""
    where = str(task_yaml)
    try:
        raw = yaml.safe_load(task_yaml.read_text())
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f" line {mark.line + 1}" if mark else ""
        raise TaskSpecError(f"{where}:{line} invalid YAML: {getattr(exc, 'problem', exc)}") from None
    if not isinstance(raw, dict):
        raise TaskSpecError(f"{where}: expected a mapping of fields, got {type(raw).__name__}")
    root = task_yaml.parent
    measured = root / MEASURED_BASELINE_FILE
    if raw.get("profile") == "full" and measured.is_file():
        raw["baseline"] = _measured_baseline(measured).as_baseline(raw.get("baseline") or {})
    try:
        spec = TaskSpec.model_validate(raw)
    except ValidationError as exc:
        raise TaskSpecError(f"{where}: {_first_error(exc)}") from None
    expected = f"{root.parent.name}_full" if spec.profile == "full" else root.name
    if spec.profile == "full" and root.name != FULL_FOLDER:
        raise TaskSpecError(f"{where}: a full-profile task lives in a folder named {FULL_FOLDER!r} inside its small "
                            f"task's folder, not in {root.name!r}")
    if spec.id != expected:
        rule = ("must match the folder name" if spec.profile == "small" else "must be its small task's folder name "
                "+ '_full':")
        raise TaskSpecError(f"{where}: field 'id': {spec.id!r} {rule} {expected!r}")
    for sub in ("workspace", "harness"):
        if not (root / sub).is_dir():
            raise TaskSpecError(f"{where}: the task folder has no {sub}/ directory")
    def arrives_later(path: str) -> bool:  # from a git artefact or the kit, when a workspace is made
        return any(copy.covers(path) for copy in spec.upstream) or any(fnmatch(copy, path) for copy in spec.kit)

    for path in spec.kit:
        if (root / "workspace" / path).exists():
            raise TaskSpecError(f"{where}: field 'kit': {path!r} is also in workspace/; keep one source (the kit's)")

    for path in spec.editable:
        if not (root / "workspace" / path).is_file() and not arrives_later(path):
            raise TaskSpecError(f"{where}: field 'editable': {path!r} does not exist in workspace/")
    for pattern in spec.protected:
        if not any((root / "workspace").glob(pattern)) and not arrives_later(pattern):
            raise TaskSpecError(f"{where}: field 'protected': {pattern!r} matches no file in workspace/")
    if spec.warm:
        from .isolation.warm import kit_module_names, local_module_names

        local = local_module_names(root / "workspace") | kit_module_names(spec.kit)
        for name in spec.warm:
            if name.partition(".")[0] in local:
                raise TaskSpecError(f"{where}: field 'warm': {name!r} is a module of the task's workspace; a warm "
                                    "parent imports installed libraries only (task code is imported fresh by each step)")
    for resource in spec.sandbox.hide:
        try:
            package_data.check(resource)
        except package_data.ResourceError as exc:
            raise TaskSpecError(f"{where}: field 'sandbox.hide': {exc}") from None
    return Task(spec, root)
