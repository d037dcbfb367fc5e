"""Whether two sessions ran on the same kind of machine: the same CPU model, instruction set (with the
numeric libraries' pins) and GPUs. Float kernels round differently from one to the next, so a task whose
kernel spread is not zero scores differently on them with nothing else changed."""

from __future__ import annotations

from dataclasses import dataclass

from ..reports.disclosure import Hardware
from ..safe_text import printable


@dataclass(frozen=True)
class MachineDifference:
    """``differs``: True, False, or None where a side's machine was not recorded (then the spread counts too)."""

    differs: bool | None
    what: list[str]

    @property
    def spread_is_noise(self) -> bool:
        return self.differs is not False


def difference(old: Hardware | None, new: Hardware | None) -> MachineDifference:
    if old is None or new is None:
        which = "neither side's machine is" if old is None and new is None else \
            f"the {'old' if old is None else 'new'} side's machine is not"
        return MachineDifference(None, [f"{which} recorded"])
    what = []
    if old.cpu_model and new.cpu_model and old.cpu_model != new.cpu_model:
        what.append(f"CPU {old.cpu_model!r} -> {new.cpu_model!r}")
    # older summaries recorded no instruction set: only what both sides recorded is compared
    if old.instruction_set and new.instruction_set and old.instruction_set != new.instruction_set:
        lost = sorted(set(old.instruction_set) - set(new.instruction_set))
        gained = sorted(set(new.instruction_set) - set(old.instruction_set))
        what.append("instruction set " + " ".join([*(f"-{f}" for f in lost), *(f"+{f}" for f in gained)]))
    if sorted(old.gpu_models) != sorted(new.gpu_models):
        what.append(f"GPUs {', '.join(old.gpu_models) or 'none'} -> {', '.join(new.gpu_models) or 'none'}")
    return MachineDifference(bool(what), [printable(w) for w in what])


def line(diff: MachineDifference, spreads: dict[str, float]) -> str | None:
    """One line for the reader where the machines differ, or one is unknown and a task's kernel spread counts
    for it, naming the tasks whose kernel spread (NI) counts as noise; None otherwise."""
    counted = {task: spread for task, spread in spreads.items() if spread > 0}
    if diff.differs is False or (diff.differs is None and not counted):
        return None
    head = "hardware differs: " if diff.differs else "hardware unknown: "
    tail = ("; the kernel spread counts as noise (a drop must exceed it): "
            + ", ".join(f"{printable(task)} {spread:.2g} NI" for task, spread in sorted(counted.items()))
            if counted else "; no compared task declares a kernel spread (task.yaml noise), so none is counted")
    return head + "; ".join(diff.what) + tail
