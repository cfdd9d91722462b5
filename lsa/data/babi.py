"""bAbI tasks (Weston et al., 2015; Facebook AI Research, CC BY 3.0): parser and a generator.

File format, one line each: ``ID text`` for a fact, ``ID question<TAB>answer<TAB>supporting ids``
for a question; IDs restart at 1 where a new story begins. As BABILong does, every question
becomes one sample holding the facts of its story up to it.

Sources, in order: ``$LSA_DATA_DIR/babi/tasks_1-20_v1-2/{en-10k,en}/`` (the ``en-10k`` split
first; its one missing file, ``qa3`` train, is taken from ``en``); else the built-in generator
of tasks qa1-qa5, written from the task definitions (actors, rooms, objects, moves, give and
receive), seedable. Which source was used travels with the samples.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path

from lsa import paths
from lsa.files import bad_input

ROOMS = ["bathroom", "bedroom", "garden", "hallway", "kitchen", "office"]
TASK_LABELS = {
    "qa1": ROOMS, "qa2": ROOMS, "qa3": ROOMS, "qa4": ROOMS,
    "qa5": ["Bill", "Fred", "Jeff", "Mary", "apple", "football", "milk"],
}
TASK_FILES = {"qa1": "qa1_single-supporting-fact", "qa2": "qa2_two-supporting-facts",
              "qa3": "qa3_three-supporting-facts", "qa4": "qa4_two-arg-relations",
              "qa5": "qa5_three-arg-relations"}


@dataclass
class BabiSample:
    task: str
    facts: list[str]
    question: str
    answer: str
    supporting: list[int] = field(default_factory=list)  # indices into ``facts``


FORMAT = ("'ID text' for a fact or 'ID question<TAB>answer<TAB>supporting IDs' for a question, "
          "IDs counting up from 1 within a story")


def parse_babi(lines: list[str], task: str, source: str | Path = "<bAbI lines>"
               ) -> list[BabiSample]:
    """One sample per question, with the story's facts before it. A malformed line or a file
    without questions stops with an error naming ``source``, the line and the format."""
    samples: list[BabiSample] = []
    facts: list[str] = []
    index_of: dict[int, int] = {}
    previous = 0
    for number, raw in enumerate(lines, 1):
        raw = raw.rstrip("\n")
        if not raw.strip():
            continue
        ident, _, text = raw.partition(" ")
        if not ident.isdigit() or not text.strip():
            raise bad_input(source, f"{raw[:60]!r} does not start with a line ID and text",
                            FORMAT, number)
        line_id = int(ident)
        if line_id == 1:
            facts, index_of = [], {}
        elif line_id <= previous:
            raise bad_input(source, f"line ID {line_id} after {previous}", FORMAT, number)
        previous = line_id
        if "\t" in text:
            parts = text.split("\t")
            support = parts[2].split() if len(parts) == 3 else []
            if len(parts) != 3 or not parts[1].strip() or not all(s.isdigit() for s in support):
                raise bad_input(source, f"question {text[:60]!r} is not question, answer and "
                                "supporting IDs separated by tabs", FORMAT, number)
            unknown = [s for s in support if int(s) not in index_of]
            if unknown:
                raise bad_input(source, f"supporting ID {unknown[0]} is no fact of this story",
                                FORMAT, number)
            samples.append(BabiSample(task, list(facts), parts[0].strip(), parts[1].strip(),
                                      [index_of[int(s)] for s in support]))
        else:
            index_of[line_id] = len(facts)
            facts.append(text.strip())
    if not samples:
        raise bad_input(source, "no question in the file" if previous else "the file is empty",
                        f"bAbI lines ({FORMAT}) with at least one question")
    return samples


def babi_folder() -> Path | None:
    user = paths.data_dir()
    if user is None:
        return None
    folder = user / "babi" / "tasks_1-20_v1-2"
    return folder if folder.is_dir() else None


def task_file(task: str, split: str) -> Path | None:
    """The bAbI file ``load_babi`` reads for ``task`` and ``split`` (the ``en-10k`` split
    first), or None where it generates the samples."""
    if task not in TASK_FILES:
        raise ValueError(f"task = {task!r}: must be one of {', '.join(TASK_FILES)}")
    if split not in ("train", "test"):
        raise ValueError(f"split = {split!r}: must be 'train' or 'test'")
    folder = babi_folder()
    for sub in ("en-10k", "en") if folder is not None else ():
        path = folder / sub / f"{TASK_FILES[task]}_{split}.txt"  # type: ignore[operator]
        if path.exists():
            return path
    return None


def file_sources(tasks: list[str]) -> dict[str, str]:
    """``{task_split: "en-10k/<file>"}`` for each task and split read from bAbI files (empty
    where every sample is generated): part of a BABILong run's identity, so runs made from
    the files and from the generator are different runs."""
    return {f"{task}_{split}": f"{path.parent.name}/{path.name}" for task in tasks
            for split in ("train", "test") if (path := task_file(task, split)) is not None}


def load_babi(task: str, split: str = "test", n: int | None = None, seed: int = 0
              ) -> tuple[list[BabiSample], str]:
    """Samples of ``task`` (qa1-qa5) and the name of their source."""
    path = task_file(task, split)
    if path is not None:
        samples = parse_babi(path.read_text(encoding="utf-8").splitlines(), task, path)
        return (samples[:n] if n else samples), f"bAbI files: {path.parent.name}/{path.name}"
    return generate(task, n or 10000, seed=seed), "built-in generator"


# ---------------------------------------------------------------------------------------------
# the generator: a small world of actors, rooms and objects

MOVES = ["moved to", "travelled to", "went to", "went back to", "journeyed to"]
GETS = ["took", "grabbed", "got", "picked up"]
DROPS = ["left", "discarded", "dropped", "put down"]
GIVES = ["gave", "handed", "passed"]
ACTORS = ["Mary", "John", "Daniel", "Sandra"]
ACTORS5 = ["Bill", "Fred", "Jeff", "Mary"]
OBJECTS = ["apple", "football", "milk"]
DIRECTIONS = {"north": "south", "south": "north", "east": "west", "west": "east"}


class _World:
    def __init__(self, rng: random.Random, actors: list[str], pick_there: float = 1.0):
        # how often "there" ends a pick-up: always in qa2/qa5, about 1 in 5 in qa3 (as in the
        # files); drops end with "there" about 1 in 5 everywhere
        self.rng, self.actors, self.pick_there = rng, actors, pick_there
        self.where: dict[str, str] = {}            # actor -> room
        self.moved_at: dict[str, int] = {}         # actor -> fact index of the last move
        self.holder: dict[str, str | None] = {o: None for o in OBJECTS}
        self.held_at: dict[str, int] = {}          # object -> fact index of the pick-up/drop
        self.obj_room: dict[str, str] = {}         # object -> room where it was dropped
        self.trail: dict[str, list[tuple[str, list[int]]]] = {o: [] for o in OBJECTS}
        self.facts: list[str] = []

    def say(self, text: str) -> int:
        self.facts.append(text)
        return len(self.facts) - 1

    def move(self) -> str:
        actor = self.rng.choice(self.actors)
        room = self.rng.choice([r for r in ROOMS if r != self.where.get(actor)])
        i = self.say(f"{actor} {self.rng.choice(MOVES)} the {room}.")
        self.where[actor], self.moved_at[actor] = room, i
        for obj, holder in self.holder.items():
            if holder == actor:
                self.trail[obj].append((room, [self.held_at[obj], i]))
        return actor

    def pick(self) -> bool:
        placed = [a for a in self.actors if a in self.where]
        free = [o for o, h in self.holder.items() if h is None]
        if not placed or not free:
            return False
        actor, obj = self.rng.choice(placed), self.rng.choice(free)
        there = " there" if self.rng.random() < self.pick_there else ""
        i = self.say(f"{actor} {self.rng.choice(GETS)} the {obj}{there}.")
        self.holder[obj], self.held_at[obj] = actor, i
        self.trail[obj].append((self.where[actor], [i, self.moved_at[actor]]))
        return True

    def drop(self) -> bool:
        held = [o for o, h in self.holder.items() if h is not None]
        if not held:
            return False
        obj = self.rng.choice(held)
        actor = self.holder[obj]
        there = " there" if self.rng.random() < 0.2 else ""
        i = self.say(f"{actor} {self.rng.choice(DROPS)} the {obj}{there}.")
        self.holder[obj], self.held_at[obj] = None, i
        self.obj_room[obj] = self.where[actor]  # type: ignore[index]
        return True


def _qa1(rng: random.Random) -> list[BabiSample]:
    w, out = _World(rng, ACTORS), []
    for _ in range(5):
        w.move()
        actor = w.move()
        out.append(BabiSample("qa1", list(w.facts), f"Where is {actor}?", w.where[actor],
                              [w.moved_at[actor]]))
    return out


def _qa2(rng: random.Random) -> list[BabiSample]:
    w, out = _World(rng, ACTORS), []
    while len(out) < 5 and len(w.facts) < 60:
        action = rng.random()
        if action < 0.55 or not w.where:
            w.move()
        elif action < 0.8:
            w.pick()
        else:
            w.drop()
        known = [o for o in OBJECTS if w.trail[o]]
        if known and rng.random() < 0.35:
            obj = rng.choice(known)
            holder = w.holder[obj]
            if holder is not None:
                answer, support = w.where[holder], [w.held_at[obj], w.moved_at[holder]]
            else:
                answer = w.obj_room[obj]
                support = [w.held_at[obj]] + [w.trail[obj][-1][1][-1]]
            out.append(BabiSample("qa2", list(w.facts), f"Where is the {obj}?", answer,
                                  sorted(set(support))))
    return out


def _qa3(rng: random.Random) -> list[BabiSample]:
    w, out = _World(rng, ACTORS, pick_there=0.2), []
    while len(out) < 5 and len(w.facts) < 200:
        action = rng.random()
        if action < 0.6 or not w.where:
            w.move()
        elif action < 0.85:
            w.pick()
        else:
            w.drop()
        for obj in OBJECTS:
            trail = [room for room, _ in w.trail[obj]]
            distinct = [r for i, r in enumerate(trail) if i == 0 or r != trail[i - 1]]
            if len(distinct) >= 2 and rng.random() < 0.04:
                last, before = distinct[-1], distinct[-2]
                support = sorted({s for room, ss in w.trail[obj][-2:] for s in ss})
                out.append(BabiSample("qa3", list(w.facts),
                                      f"Where was the {obj} before the {last}?", before,
                                      support))
                break
    return out


def _qa4(rng: random.Random) -> list[BabiSample]:
    a, b, c = rng.sample(ROOMS, 3)
    d = rng.choice(list(DIRECTIONS))
    facts = [f"The {a} is {d} of the {b}.", f"The {c} is {d} of the {a}."]
    if rng.random() < 0.5:
        facts.reverse()
    if rng.random() < 0.5:
        question, answer, fact = f"What is {d} of the {b}?", a, f"The {a} is {d} of the {b}."
    else:
        question, answer, fact = f"What is the {a} {d} of?", b, f"The {a} is {d} of the {b}."
    return [BabiSample("qa4", facts, question, answer, [facts.index(fact)])]


def _qa5(rng: random.Random) -> list[BabiSample]:
    w, out = _World(rng, ACTORS5), []
    while len(out) < 5 and len(w.facts) < 80:
        if rng.random() < 0.3 or len(w.where) < 2:
            w.move()
            continue
        giver = rng.choice([a for a in ACTORS5 if a in w.where])
        receiver = rng.choice([a for a in ACTORS5 if a != giver])
        obj = rng.choice(OBJECTS)
        i = w.say(f"{giver} {rng.choice(GIVES)} the {obj} to {receiver}.")
        kind = rng.randrange(4)
        question, answer = [
            (f"What did {giver} give to {receiver}?", obj),
            (f"Who gave the {obj} to {receiver}?", giver),
            (f"Who received the {obj}?", receiver),
            (f"Who did {giver} give the {obj} to?", receiver),
        ][kind]
        if rng.random() < 0.6:
            out.append(BabiSample("qa5", list(w.facts), question, answer, [i]))
    return out


_TASKS = {"qa1": _qa1, "qa2": _qa2, "qa3": _qa3, "qa4": _qa4, "qa5": _qa5}


def generate(task: str, n: int, seed: int = 0) -> list[BabiSample]:
    """``n`` samples of ``task`` from the built-in generator (deterministic from ``seed``)."""
    if task not in _TASKS:
        raise ValueError(f"task = {task!r}: the generator covers {', '.join(_TASKS)}")
    rng = random.Random(f"{task}/{seed}")
    out: list[BabiSample] = []
    while len(out) < n:
        out.extend(_TASKS[task](rng))
    return out[:n]
