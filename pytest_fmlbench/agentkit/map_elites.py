"""OpenEvolve's program database: islands of programs, a MAP-Elites grid per island, a global archive.

After codelion/openevolve's database as FML-bench ports it (sequential, single model):

- features: complexity = characters of code; diversity = mean edit distance (1 - difflib ratio) to a
  reference set of working programs chosen greedily for spread. Complexity is binned over the range
  seen so far, diversity over [0, 1], into ``feature_bins`` bins each.
- insertion: a program takes its island's cell when the cell is empty or it is fitter than the
  occupant; working programs enter the archive, which keeps the ``archive_size`` fittest.
- parent sampling per island: with ``exploration_ratio`` a random program of the island, with
  ``exploitation_ratio`` an archive program (of the island if it has any, else any), otherwise one
  drawn with probability proportional to fitness. Inspirations: the island's best, its elite, programs
  of nearby cells, then random ones.
- migration: every ``migration_interval`` generations each island sends its fittest
  ``migration_rate`` share (at least one; copies are never re-sent) to both ring neighbours.

All randomness comes from the ``rng`` given, and every collection is ordered, so a run replays exactly.
"""

from __future__ import annotations

import difflib
import hashlib
import random
from dataclasses import dataclass
from typing import Literal

# the port caps the text compared for diversity (difflib is quadratic)
DIVERSITY_MAX_CHARS = 23000
_MIN_WEIGHT = 1e-3  # a program of no fitness still has this weight in fitness-proportional sampling


@dataclass(eq=False)
class Program:
    id: str
    code: str  # the editable files joined in path order: what the features are computed on
    island: int
    generation: int = 0
    step: int | None = None  # the step whose code this is (None: the baseline)
    parent: str | None = None
    metric: float | None = None
    buggy: bool = False
    error: str = ""
    analysis: str = ""
    description: str = ""
    complexity: float = 0.0
    diversity: float = 0.5
    migrated: bool = False
    debug_depth: int = 0


@dataclass(frozen=True)
class Placement:
    cell: tuple[int, int]
    outcome: str  # "new cell", "took the cell from <id>", "cell kept by <id>"
    in_archive: bool
    evicted: tuple[str, ...] = ()


@dataclass(frozen=True)
class Sample:
    parent: Program
    inspirations: list[Program]
    strategy: Literal["exploration", "exploitation", "weighted"]


@dataclass
class Settings:
    num_islands: int = 3
    feature_bins: int = 5
    archive_size: int = 30
    exploration_ratio: float = 0.2
    exploitation_ratio: float = 0.7
    migration_interval: int = 10
    migration_rate: float = 0.1
    diversity_reference_size: int = 10
    elite_selection_ratio: float = 0.1
    num_inspirations: int = 3


class Population:
    def __init__(self, settings: Settings, direction: Literal["higher", "lower"], rng: random.Random):
        self.cfg = settings
        self.direction = direction
        self.rng = rng
        self.programs: dict[str, Program] = {}
        self.islands: list[list[str]] = [[] for _ in range(settings.num_islands)]
        self.cells: list[dict[tuple[int, int], str]] = [{} for _ in range(settings.num_islands)]
        self.island_best: list[str | None] = [None] * settings.num_islands
        self.generations: list[int] = [0] * settings.num_islands
        self.archive: list[str] = []
        self.best: str | None = None
        self.last_migration_generation = 0
        self.reference: list[str] = []  # codes that diversity is measured against
        self._complexity_range = (float("inf"), float("-inf"))
        self._distance_cache: dict[tuple[str, str], float] = {}
        self._migrants = 0

    # -- features -----------------------------------------------------------------------------------
    def distance(self, a: str, b: str) -> float:
        if a == b:
            return 0.0
        key = (_digest(a), _digest(b))
        if key not in self._distance_cache:
            self._distance_cache[key] = 1.0 - difflib.SequenceMatcher(None, a, b).ratio()
        return self._distance_cache[key]

    def diversity_of(self, code: str) -> float:
        if not self.reference:
            return 0.5
        code = code[:DIVERSITY_MAX_CHARS]
        return sum(self.distance(code, ref) for ref in self.reference) / len(self.reference)

    def coords(self, program: Program) -> tuple[int, int]:
        bins = self.cfg.feature_bins
        low, high = self._complexity_range
        c_norm = (program.complexity - low) / (high - low) if high > low else 0.5
        d_norm = program.diversity  # already in [0, 1]
        return min(int(c_norm * bins), bins - 1), min(max(int(d_norm * bins), 0), bins - 1)

    def _update_reference(self) -> None:
        codes = [p.code[:DIVERSITY_MAX_CHARS] for p in self.programs.values() if not p.buggy and p.code]
        size = self.cfg.diversity_reference_size
        if len(codes) <= size:
            self.reference = codes
            return
        remaining = list(codes)
        chosen = [remaining.pop(self.rng.randint(0, len(remaining) - 1))]
        while len(chosen) < size and remaining:
            spreads = [min(self.distance(c, s) for s in chosen) for c in remaining]
            chosen.append(remaining.pop(spreads.index(max(spreads))))
        self.reference = chosen

    # -- insertion ----------------------------------------------------------------------------------
    def better(self, a: Program, b: Program) -> bool:
        if a.metric is None:
            return False
        if b.metric is None:
            return True
        return a.metric > b.metric if self.direction == "higher" else a.metric < b.metric

    def add(self, program: Program) -> Placement:
        self.programs[program.id] = program
        self.islands[program.island].append(program.id)
        low, high = self._complexity_range
        self._complexity_range = (min(low, program.complexity), max(high, program.complexity))
        cell = self.coords(program)
        cells = self.cells[program.island]
        occupant = self.programs.get(cells[cell]) if cell in cells else None
        if occupant is None:
            cells[cell], outcome = program.id, "new cell"
        elif self.better(program, occupant):
            cells[cell], outcome = program.id, f"took the cell from {occupant.id}"
        else:
            outcome = f"cell kept by {occupant.id}"
        evicted = self._archive(program)
        if not program.buggy:
            self._update_best(program)
            self._update_reference()
        return Placement(cell, outcome, program.id in self.archive, evicted)

    def _archive(self, program: Program) -> tuple[str, ...]:
        if program.buggy:
            return ()
        self.archive.append(program.id)
        evicted = []
        if len(self.archive) > self.cfg.archive_size:
            worst_first = sorted(self.archive, key=lambda pid: self._fitness_key(self.programs[pid]))
            while len(self.archive) > self.cfg.archive_size:
                evicted.append(worst_first.pop(0))
                self.archive.remove(evicted[-1])
        return tuple(evicted)

    def _fitness_key(self, program: Program) -> float:
        """Sorts worst first."""
        if program.metric is None:
            return float("-inf")
        return program.metric if self.direction == "higher" else -program.metric

    def _update_best(self, program: Program) -> None:
        island = program.island
        current = self.island_best[island]
        if current is None or self.better(program, self.programs[current]):
            self.island_best[island] = program.id
        if self.best is None or self.better(program, self.programs[self.best]):
            self.best = program.id

    # -- reading --------------------------------------------------------------------------------------
    def top(self, n: int, island: int) -> list[Program]:
        working = [self.programs[pid] for pid in self.islands[island] if not self.programs[pid].buggy]
        working.sort(key=self._fitness_key, reverse=True)
        return working[:n]

    def island_programs(self, island: int) -> list[Program]:
        return [self.programs[pid] for pid in self.islands[island]]

    # -- sampling -------------------------------------------------------------------------------------
    def sample(self, island: int) -> Sample:
        parent, strategy = self._parent(island)
        return Sample(parent, self._inspirations(parent, parent.island), strategy)

    def _parent(self, island: int) -> tuple[Program, str]:
        members = self.islands[island]
        if not members:
            raise ValueError(f"island {island} is empty")
        r = self.rng.random()
        if r < self.cfg.exploration_ratio:
            return self.programs[self.rng.choice(members)], "exploration"
        if r < self.cfg.exploration_ratio + self.cfg.exploitation_ratio:
            if not self.archive:
                return self._weighted(island), "exploitation"
            local = [pid for pid in self.archive if self.programs[pid].island == island]
            return self.programs[self.rng.choice(local or self.archive)], "exploitation"
        return self._weighted(island), "weighted"

    def _weighted(self, island: int) -> Program:
        members = self.island_programs(island)
        if not members:
            return self.rng.choice(list(self.programs.values()))
        if len(members) == 1:
            return members[0]
        scored = [p.metric for p in members if not p.buggy and p.metric is not None]
        if not scored:
            return self.rng.choice(members)
        mirror = max(scored) + min(scored)  # lower-is-better: reflect within the scored range

        def fitness(p: Program) -> float:
            if p.buggy or p.metric is None:
                return 0.0
            return p.metric if self.direction == "higher" else mirror - p.metric

        weights = [max(fitness(p), _MIN_WEIGHT) for p in members]
        return self.rng.choices(members, weights=weights, k=1)[0]

    def _inspirations(self, parent: Program, island: int) -> list[Program]:
        n = self.cfg.num_inspirations
        chosen: list[Program] = []
        seen = {parent.id}
        best = self.island_best[island]
        if best is not None and best not in seen:
            chosen.append(self.programs[best])
            seen.add(best)
        for p in self.top(max(1, int(n * self.cfg.elite_selection_ratio)), island):
            if p.id not in seen:
                chosen.append(p)
                seen.add(p.id)
        members = self.islands[island]
        if len(members) > n and len(chosen) < n:
            slots = n - len(chosen)
            by_cell: dict[tuple[int, int], str] = {}
            for pid in members:  # the last program of a cell stands for it, as in the port
                by_cell[self.coords(self.programs[pid])] = pid
            c, d = self.coords(parent)
            last = self.cfg.feature_bins - 1
            nearby: list[Program] = []
            for _ in range(slots * 3):
                cell = (max(0, min(last, c + self.rng.randint(-2, 2))), max(0, min(last, d + self.rng.randint(-2, 2))))
                pid = by_cell.get(cell)
                if pid is not None and pid not in seen:
                    nearby.append(self.programs[pid])
                    seen.add(pid)
                    if len(nearby) >= slots:
                        break
            if len(chosen) + len(nearby) < n:
                available = [pid for pid in members if pid not in seen]
                if available:
                    wanted = min(n - len(chosen) - len(nearby), len(available))
                    nearby.extend(self.programs[pid] for pid in self.rng.sample(available, wanted))
            chosen.extend(nearby)
        return chosen[:n]

    # -- generations and migration ------------------------------------------------------------------
    def end_generation(self, slots: list[int]) -> list[dict] | None:
        """Count a generation on each island slot that ran a step; migrate when one is due."""
        for slot in slots:
            self.generations[slot] += 1
        if max(self.generations) - self.last_migration_generation >= self.cfg.migration_interval:
            return self.migrate()
        return None

    def migrate(self) -> list[dict]:
        moves = []
        n = self.cfg.num_islands
        for source in range(n):
            count = max(1, int(len(self.islands[source]) * self.cfg.migration_rate))
            targets = sorted({(source + 1) % n, (source - 1) % n} - {source})
            for program in self.top(count, source):
                if program.migrated:
                    continue
                for target in targets:
                    self._migrants += 1
                    copy = Program(
                        id=f"m{self._migrants}", code=program.code, island=target, generation=program.generation,
                        step=program.step, parent=program.id, metric=program.metric, buggy=program.buggy,
                        analysis=program.analysis, description=f"[migrated from island {source}] {program.description}",
                        complexity=program.complexity, diversity=program.diversity, migrated=True)
                    placement = self.add(copy)
                    moves.append({"program": program.id, "copy": copy.id, "from": source, "to": target,
                                  "metric": program.metric, "cell": list(placement.cell)})
        self.last_migration_generation = max(self.generations)
        return moves


def _digest(text: str) -> str:
    return hashlib.sha1(text.encode(), usedforsecurity=False).hexdigest()


def join_code(files: dict[str, str]) -> str:
    return "\n".join(files[path] for path in sorted(files))

