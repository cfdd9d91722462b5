"""When does the scratch `mini` model learn to copy? The exploratory runs behind the README's
"The testbed" paragraph (not part of the pipeline; numbers there are labelled exploratory).

Pretrains the `mini` architecture on the `mini` training books with recurring blocks and prints,
every ``--probe-every`` steps, the far-copy gain of gate G1 (copy NLL without vs with the far
occurrence, on the test books' copy probes at the window and at 2x). One process, its own loop
(no checkpoints, no metrics files), so that one setting can be changed at a time:

    python docs/exploration/copy_emergence.py                      # the pipeline's recipe
    python docs/exploration/copy_emergence.py --fraction 0.333     # a third of tokens copied
    python docs/exploration/copy_emergence.py --block-window 64    # blocks of 32 tokens
    python docs/exploration/copy_emergence.py --random-blocks 0.5  # half the blocks noise
    python docs/exploration/copy_emergence.py --straddle           # blocks across books

``--straddle`` cuts the concatenated books into blocks without regard to where a book ends
(the first exploratory script did; it reached a gain of 1.5 nats at 2500 steps, the pipeline's
stream 0.1-0.3). Batches are drawn from one generator seeded with ``--order``.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch

from lsa.config import load_config
from lsa.data.corpus import prepare_corpus
from lsa.data.recurrence import insert_recurrences
from lsa.data.tokens import TokenStream
from lsa.evaluate.longrange import copy_retrieval
from lsa.models import scratch_llama


def straddling_blocks(ids: np.ndarray, block: int, span: int, p_copy: float, seed: int):
    """Blocks of ``block`` tokens of the concatenated books, each followed with probability
    ``p_copy`` by its ``span``-token chunks shuffled (``insert_recurrences`` without books)."""
    rng = np.random.default_rng(seed)
    out = []
    for start in range(0, len(ids) - block, block):
        text = ids[start:start + block]
        out.append(text)
        if rng.random() < p_copy:
            order = rng.permutation(block // span)
            out.append(text.reshape(-1, span)[order].reshape(-1))
    return np.concatenate(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--fraction", type=float, default=0.5, help="share of tokens copied")
    ap.add_argument("--span", type=int, default=16)
    ap.add_argument("--block-window", type=int, default=128,
                    help="max_distance of insert_recurrences (blocks of half of it)")
    ap.add_argument("--random-blocks", type=float, default=0.0,
                    help="share of 64-token stretches replaced by tokens drawn from the stream")
    ap.add_argument("--straddle", action="store_true", help="blocks across book ends")
    ap.add_argument("--steps", type=int, default=2500)
    ap.add_argument("--lr", type=float, default=0.003)
    ap.add_argument("--heads", type=int, default=2)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--order", type=int, default=0, help="seed of the batch order")
    ap.add_argument("--probe-every", type=int, default=500)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()

    torch.set_num_threads(args.threads)
    pipe = load_config(profile="mini")
    model_cfg, window = pipe.pretrain.model, pipe.pretrain.model.base_window
    corpus = prepare_corpus(pipe.pretrain.data)
    plain = corpus.streams["train"]
    ids = plain.ids.copy()
    if args.random_blocks:
        rng = np.random.default_rng(1)
        for start in range(0, len(ids) - 64, 64):
            if rng.random() < args.random_blocks:
                ids[start:start + 64] = plain.ids[rng.integers(0, len(ids), 64)]
        ids[plain.ids == plain.eos_id] = plain.eos_id
    if args.straddle:
        block = (args.block_window // 2) // args.span * args.span
        ids = straddling_blocks(ids, block, args.span, args.fraction / (1 - args.fraction), 0)
    else:
        ids = insert_recurrences(ids, plain.eos_id, args.fraction, args.span, args.block_window, 0)
    stream = TokenStream(ids, "train", plain.eos_id)
    model = scratch_llama(len(corpus.tokenizer), model_cfg.hidden_size, args.layers, args.heads,
                          model_cfg.intermediate_size, window)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.1, betas=(0.9, 0.95))
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / 30))
    gen = torch.Generator().manual_seed(args.order)
    t0 = time.time()
    for step in range(args.steps + 1):
        if step % args.probe_every == 0 or step == args.steps:
            res = copy_retrieval(model, corpus.streams["test"], [window, 2 * window], 32,
                                 args.span, 0, control=True)
            print(step, f"{time.time() - t0:.0f}s", " ".join(
                f"L{n}: gain {r['gain']:.3f} +- {r['gain_stderr']:.3f} copy {r['copy_nll']:.2f}"
                for n, r in res.items()), flush=True)
            model.train()
        if step == args.steps:
            break
        x = stream.sample(pipe.pretrain.optim.batch_size, window, gen)
        loss = model(input_ids=x, labels=x).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        opt.zero_grad()
        if step % 250 == 0:
            print("  step", step, "loss", round(loss.item(), 3), flush=True)


if __name__ == "__main__":
    main()
