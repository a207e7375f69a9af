"""What bfloat16 autocast buys on this CPU: SmolLM2-135M generating and training, float32
against ``autocast="bf16"`` (``TrainableVL(autocast=...)``, RLConfig/SFTConfig ``autocast``,
``bench_learning.py --autocast bf16``).

    .venv/bin/owrl model fetch smollm2                 # once
    .venv/bin/python bench/bench_autocast.py [--threads 2] [--batch 8] [--prompt-tokens 800]

After one untimed round of each, it times, alternating which mode goes first, (1) one
generation batch of ``--batch`` prompts of about ``--prompt-tokens`` tokens (a page's
accessibility tree, as the learning benchmark's prompts are), greedy, at most 64 new
tokens, and (2) one LoRA training step (forward and backward) on 4 such samples. It prints
the medians, the speed-up, the tokens each mode generated (greedy answers may stop at
different lengths: the batch's time counts its longest), and how many answers came out the
same in both modes (bfloat16 rounds differently, so some do not). Whether the CPU has bfloat16 instructions decides the figures: without them
autocast is slower, not faster.
"""

from __future__ import annotations

import argparse
import statistics
import time
import warnings
from typing import Any


def page_tree(i: int, lines: int) -> str:
    """An accessibility tree of ``lines`` elements, different for each ``i``."""
    roles = ["button", "link", "textbox", "checkbox", "generic", "heading"]
    words = ["Submit", "Cancel", "Next", "Search", "Username", "Password", "Home", "Orders", "Help", "Cart"]
    return "\n".join(f'- {roles[(i + k) % len(roles)]} "{words[(i * 7 + k) % len(words)]} {k}" [ref=e{k + 2}]'
                     for k in range(lines))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--prompt-tokens", type=int, default=800)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    import torch

    from owrl_openwebrl.backend import Sampling
    from owrl_openwebrl.fetch import fetched
    from owrl_openwebrl.prompt import Prompt
    from owrl_train.data import Sample
    from owrl_train.model import TrainableVL

    path = fetched("smollm2")
    if path is None:
        raise SystemExit("no model: run `owrl model fetch smollm2` first")
    if args.threads:
        torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, CPU capability "
          f"{torch.backends.cpu.get_cpu_capability()}, bfloat16 instructions: "
          f"{torch.ops.mkldnn._is_mkldnn_bf16_supported()}")
    from owrl_sdk.contract.plugins import Plugins

    catalogue = Plugins().catalogue
    models = {mode: TrainableVL(str(path), catalogue=catalogue, lora_r=16, seed=0, lora_layers=12, autocast=mode)
              for mode in ("none", "bf16")}
    tok = models["none"].tokenizer
    lines = max(10, args.prompt_tokens // 17)
    prompts = []
    for i in range(args.batch):
        messages = [{"role": "system", "content": [{"type": "text", "text": "Answer with <tool_call> blocks."}]},
                    {"role": "user", "content": [{"type": "text",
                                                  "text": f"Task: click the button number {i}.\n{page_tree(i, lines)}"}]}]
        prompts.append(Prompt(messages=messages))
    sizes = [len(tok(models["none"].backend.render(p)).input_ids) for p in prompts]
    sampling = Sampling(temperature=0.0, max_new_tokens=64)
    samples = [Sample(prompt=p, target='<tool_call>\n{"name": "click", "arguments": {"ref": "e5"}}\n'
                      '</tool_call>') for p in prompts[:4]]
    times: dict[str, dict[str, list[float]]] = {m: {"generate": [], "train step": []} for m in models}
    answers: dict[str, list[Any]] = {}

    def measure(mode: str, keep: bool) -> None:
        model = models[mode]
        model.model.eval()
        t = time.perf_counter()
        answers[mode] = model.backend.generate(prompts, sampling)
        generated = time.perf_counter() - t
        model.model.train()
        t = time.perf_counter()
        logp, mask, _ = model.token_logprobs(model.encode(samples))
        (-(logp * mask).sum() / mask.sum()).backward()
        stepped = time.perf_counter() - t
        model.model.zero_grad()
        if keep:
            times[mode]["generate"].append(generated)
            times[mode]["train step"].append(stepped)

    for mode in models:  # warm-up: one-off costs (allocation, kernel choice) are not counted
        measure(mode, keep=False)
    for i in range(args.repeats):
        for mode in (("none", "bf16") if i % 2 == 0 else ("bf16", "none")):
            measure(mode, keep=True)
    print(f"{args.batch} prompts of {min(sizes)}-{max(sizes)} tokens, greedy, at most 64 new tokens; "
          f"a training step on 4 of them; medians of {args.repeats}, in seconds")
    print(f"{'':14}{'float32':>10}{'bf16':>10}{'speed-up':>10}")
    for what in ("generate", "train step"):
        a, b = (statistics.median(times[m][what]) for m in ("none", "bf16"))
        print(f"{what:14}{a:10.1f}{b:10.1f}{a / b:9.1f}x")
    print("tokens generated: " + ", ".join(f"{m} {sum(g.completion_tokens for g in answers[m])} (longest "
                                            f"{max(g.completion_tokens for g in answers[m])})" for m in models))
    same = sum(1 for x, y in zip(answers["none"], answers["bf16"]) if x.text == y.text)
    print(f"greedy answers the same in both modes: {same}/{args.batch}")
    print(f"reproduce: .venv/bin/python bench/bench_autocast.py --threads {args.threads} --batch {args.batch} "
          f"--prompt-tokens {args.prompt_tokens}")


if __name__ == "__main__":
    main()
