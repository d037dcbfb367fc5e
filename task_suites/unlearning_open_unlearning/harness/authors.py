"""Fictitious authors and facts about them: the stand-in for TOFU's 200 made-up authors.

TOFU (Maini et al. 2024) fine-tunes a model on 20 question-answer pairs about each of 200 authors who
do not exist, so that everything the model knows about them comes from that fine-tuning. This module
draws a smaller population the same way, from fixed seeds: made-up names (one word each), one value
per attribute per author, one question and one answer template per attribute, and for the truth
ratio wrong values of the same kind. Words are whole tokens (a word-level vocabulary).

TOFU's truth ratio compares a PARAPHRASED correct answer with perturbed (wrong) ones. A model this
small has no pre-training to carry knowledge across wordings, so here the correct answer keeps the
trained wording and the perturbed answers differ from it only in the fact.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

AUTHOR_SEED = 27_182
N_AUTHORS = 200
FORGET_FRACTION = 0.1  # TOFU's forget10
N_PERTURBED = 5  # wrong answers per truth-ratio item (TOFU's five)
VAL_FRACTION = 0.4  # of the forget facts, scored on validation; the rest on the hidden test

SYLLABLES = ["ka", "lo", "mi", "ren", "tas", "vel", "dor", "sin", "pa", "ru", "zel", "mor", "ti", "nek",
             "sa", "vol", "bri", "an", "quo", "fen", "lu", "gar", "ish", "tov"]
CITIES = ["arvella", "brennic", "calvora", "dunmere", "estrola", "fenwick", "galdra", "hollin",
          "ismere", "jortan", "kelvara", "lorsk", "morvant", "nessel", "orlin", "pelgrave"]
GENRES = ["mystery", "poetry", "fantasy", "romance", "horror", "satire", "memoir", "drama", "thriller",
          "folklore", "westerns", "essays"]
JOBS = ["baker", "surgeon", "sailor", "tailor", "miner", "teacher", "painter", "farmer", "pilot",
        "judge", "chemist", "butcher", "clockmaker", "librarian"]
AWARDS = ["amberlight", "silverquill", "northwind", "goldleaf", "starling", "ironpen", "bluebell",
          "everwood", "dawnstar", "moonreed"]
LANGUAGES = ["tarvic", "ellish", "momran", "quessi", "dorvan", "sulenic", "brathic", "olvane"]
PETS = ["parrot", "tortoise", "ferret", "greyhound", "goldfish", "peacock", "hedgehog", "rabbit",
        "falcon", "lizard"]
YEARS = [str(year) for year in range(1931, 1991, 2)]
IDK = "i do not know ."  # in the vocabulary for "I don't know"-style unlearning targets


@dataclass(frozen=True)
class Attribute:
    name: str
    values: list[str]
    question: str  # {n}: the author's name
    answer: str  # {v}: the value


ATTRIBUTES = [
    Attribute("birthplace", CITIES, "where was {n} born ?", "in {v} ."),
    Attribute("birth_year", YEARS, "when was {n} born ?", "in {v} ."),
    Attribute("genre", GENRES, "what does {n} write ?", "{v} ."),
    Attribute("father_job", JOBS, "what was the father of {n} ?", "a {v} ."),
    Attribute("mother_job", JOBS, "what was the mother of {n} ?", "a {v} ."),
    Attribute("award", AWARDS, "which prize did {n} win ?", "the {v} prize ."),
    Attribute("language", LANGUAGES, "in which language does {n} write ?", "in {v} ."),
    Attribute("pet", PETS, "what pet does {n} keep ?", "a {v} ."),
]


@dataclass(frozen=True)
class Fact:
    author: int
    attribute: int
    value: str


def author_names(rng: np.random.Generator) -> list[str]:
    names: list[str] = []
    while len(names) < N_AUTHORS:
        # one word (one token) per author: the fact is tied to that token and the question
        name = "".join(rng.choice(SYLLABLES, size=3))
        if name not in names:
            names.append(name)
    return names


def qa(fact: Fact, names: list[str], value: str | None = None) -> dict[str, str]:
    attr = ATTRIBUTES[fact.attribute]
    return {"question": attr.question.format(n=names[fact.author]),
            "answer": attr.answer.format(v=fact.value if value is None else value)}


def truth_ratio_item(fact: Fact, names: list[str], rng: np.random.Generator) -> dict:
    """The question, its correct answer and N_PERTURBED answers that state a wrong value instead."""
    wrong = rng.choice([v for v in ATTRIBUTES[fact.attribute].values if v != fact.value],
                       size=N_PERTURBED, replace=False)
    item = qa(fact, names)
    return {"question": item["question"], "answer": item["answer"],
            "perturbed": [qa(fact, names, str(v))["answer"] for v in wrong]}


def population() -> dict:
    """Everything the task is made of, from fixed seeds.

    ``forget`` / ``retain``: question-answer pairs (dicts) about the forgotten authors (TOFU's forget10)
    and about the others; ``val_items`` / ``test_items``: truth-ratio items on disjoint parts of the
    forget set (the original scores 30% of the forget set on val and 70% on test); ``vocab``.
    """
    rng = np.random.default_rng(AUTHOR_SEED)
    names = author_names(rng)
    facts = [Fact(a, k, attr.values[rng.integers(len(attr.values))])
             for a in range(N_AUTHORS) for k, attr in enumerate(ATTRIBUTES)]
    n_forget = round(FORGET_FRACTION * N_AUTHORS)
    forget_authors = set(int(a) for a in rng.choice(N_AUTHORS, size=n_forget, replace=False))
    forget_facts = [f for f in facts if f.author in forget_authors]
    order = rng.permutation(len(forget_facts))
    n_val = round(VAL_FRACTION * len(forget_facts))
    items = [truth_ratio_item(f, names, rng) for f in forget_facts]
    return {
        "names": names,
        "forget": [qa(f, names) for f in forget_facts],
        "retain": [qa(f, names) for f in facts if f.author not in forget_authors],
        "val_items": [items[i] for i in sorted(order[:n_val])],
        "test_items": [items[i] for i in sorted(order[n_val:])],
        "vocab": vocabulary(names),
    }


def vocabulary(names: list[str]) -> dict[str, int]:
    """Word -> id over every text the task can produce; ids 0..3 are <pad>, <q>, <a>, <eos>."""
    words = ["<pad>", "<q>", "<a>", "<eos>"]
    texts = [IDK] + names
    for attr in ATTRIBUTES:
        texts += [attr.question, attr.answer] + attr.values
    for text in texts:
        for word in text.replace("{n}", "").replace("{v}", "").split():
            if word not in words:
                words.append(word)
    return {word: i for i, word in enumerate(words)}
