"""The accelerate config of sharded full fine-tuning (workflow/accelerate/fsdp.yaml) on the
CPU, for ``tests/e2e/long/test_cluster_processes.py``: ``accelerate launch --config_file
workflow/accelerate/fsdp.yaml --num_processes 2 tests/support/fsdp_two_processes.py OUT``.

Each process reads the FSDP settings accelerate hands it from the config
(``FullyShardedDataParallelPlugin()``: accelerate itself turns FSDP on only on GPUs), shards a
tiny Llama with them (torch FSDP2, gloo): one unit per ``fsdp_transformer_layer_cls_to_wrap``
layer, then the root; trains three AdamW steps on its own batches, and writes
``OUT/process<i>.json``: the settings, its parameter count and local shard size, its losses
and a digest of the gathered full weights.
"""

import json
import sys
from pathlib import Path

import torch
from accelerate import PartialState
from accelerate.utils import FullyShardedDataParallelPlugin
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard

from lsa.models import scratch_llama


def main(out: Path) -> None:
    state = PartialState(cpu=True)
    plugin = FullyShardedDataParallelPlugin()  # from the config's FSDP_* environment
    model = scratch_llama(vocab_size=64, hidden_size=16, n_layers=2, n_heads=2,
                          intermediate_size=32, base_window=8, seed=0)
    total = sum(p.numel() for p in model.parameters())
    mesh = init_device_mesh("cpu", (state.num_processes,))
    wrap = set(plugin.transformer_cls_names_to_wrap)
    units = 0
    for module in model.modules():
        if type(module).__name__ in wrap:
            fully_shard(module, mesh=mesh, reshard_after_forward=plugin.reshard_after_forward)
            units += 1
    fully_shard(model, mesh=mesh, reshard_after_forward=plugin.reshard_after_forward)
    local = sum(p.to_local().numel() for p in model.parameters())
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    gen = torch.Generator().manual_seed(state.process_index)
    losses = []
    for _ in range(3):
        tokens = torch.randint(0, 64, (2, 8), generator=gen)
        loss = model(input_ids=tokens, labels=tokens).loss
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(float(loss.detach()))
    full = torch.cat([p.full_tensor().detach().flatten() for p in model.parameters()])
    (out / f"process{state.process_index}.json").write_text(json.dumps({
        "fsdp_version": plugin.fsdp_version, "wrap": sorted(wrap), "units": units,
        "state_dict_type": str(plugin.state_dict_type),
        "cpu_ram_efficient_loading": plugin.cpu_ram_efficient_loading,
        "processes": state.num_processes, "total": total, "local": local, "losses": losses,
        "weights_sum": float(full.double().sum())}))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
