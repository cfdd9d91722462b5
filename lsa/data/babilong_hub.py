"""The published BABILong data through ``datasets`` (profiles ``gpu-small`` / ``paper``, with
network access to the hub), in the same sample format as the local assembly.

**Status: not yet used.** No profile, job or notebook reads it; only its tests reach it. The
BABILong section of every profile assembles its samples locally (``lsa.data.babilong``, in the
evaluated model's tokens); this loader is kept for a comparison with the published samples.

The published dataset (``RMT-team/babilong``) has one configuration per length ("4k", "8k",
...) and one split per task ("qa1", ...), with the fields ``input`` (facts in book text),
``question`` and ``target``. Its haystacks are PG19 books, its lengths measured in the
tokenizer of its authors; local assembly (``lsa.data.babilong``) measures them in the evaluated
model's own tokens and is what the mini profile uses.
"""

from __future__ import annotations

from lsa.data.babilong import BabilongSample

HUB_DATASET = "RMT-team/babilong"
LENGTHS = {"0k": 0, "1k": 1024, "2k": 2048, "4k": 4096, "8k": 8192, "16k": 16384,
           "32k": 32768, "64k": 65536, "128k": 131072}


def from_row(row: dict, task: str, length: int) -> BabilongSample:
    return BabilongSample(task=task, context=row["input"], question=row["question"],
                          answer=row["target"], length=length, tokens=-1)


def load_hub(task: str, length: str, n: int | None = None, dataset: str = HUB_DATASET
             ) -> list[BabilongSample]:
    """``n`` samples of ``task`` at ``length`` (a configuration name such as "8k")."""
    if length not in LENGTHS:
        raise ValueError(f"length = {length!r}: must be one of {', '.join(LENGTHS)}")
    from datasets import load_dataset

    rows = load_dataset(dataset, length, split=task)
    rows = rows.select(range(min(n, len(rows)))) if n else rows
    return [from_row(dict(r), task, LENGTHS[length]) for r in rows]
