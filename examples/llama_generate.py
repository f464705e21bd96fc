"""Generate text from a Hugging Face Llama / Qwen checkpoint directory, using the KV cache.

    python examples/llama_generate.py --checkpoint ~/Llama-3.2-1B --prompt "The sea" --top-p 0.9

The prompt is tokenised with the directory's tokenizer.json when there is one; otherwise pass
token ids with --prompt-ids. Greedy by default; --temperature with --top-k / --top-p samples.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch
from tqdm import tqdm

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout
from torchtpu.models.checkpoint import load_pretrained  # noqa: E402
from torchtpu.models.generate import generate  # noqa: E402

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def pick_device(name: str) -> torch.device:
    if name == "tpu":
        import torchtpu  # noqa: F401  (registers the 'tpu' device)

        return torch.device("tpu:0")  # with an index: autograd needs it (DESIGN.md)
    return torch.device(name)


def load_tokenizer(checkpoint: Path):
    """The checkpoint's `tokenizers` tokenizer, or None when it ships without one."""
    if not (checkpoint / "tokenizer.json").exists():
        return None
    from tokenizers import Tokenizer  # installed with transformers; only needed here

    return Tokenizer.from_file(str(checkpoint / "tokenizer.json"))


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--checkpoint", type=Path, required=True, help="HF checkpoint directory")
    p.add_argument("--device", default="tpu", help="tpu, cpu, or any torch device")
    p.add_argument("--dtype", default="bfloat16", choices=sorted(DTYPES))
    p.add_argument("--prompt", default=None, help="text; needs tokenizer.json")
    p.add_argument("--prompt-ids", default="1", help="comma-separated token ids")
    p.add_argument("--max-new-tokens", type=int, default=32)
    p.add_argument("--temperature", type=float, default=0.0, help="0: greedy")
    p.add_argument("--top-k", type=int, default=None)
    p.add_argument("--top-p", type=float, default=None)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)

    device = pick_device(args.device)
    torch.manual_seed(args.seed)
    t0 = time.perf_counter()
    model = load_pretrained(args.checkpoint, device=device, dtype=DTYPES[args.dtype]).eval()
    print(f"loaded {args.checkpoint} in {time.perf_counter() - t0:.2f}s")
    tok = load_tokenizer(args.checkpoint)
    if args.prompt is not None:
        if tok is None:
            sys.exit(f"--prompt needs {args.checkpoint / 'tokenizer.json'}; use --prompt-ids")
        ids = tok.encode(args.prompt).ids
    else:
        ids = [int(i) for i in args.prompt_ids.split(",")]
    temperature = args.temperature
    if temperature == 0 and (args.top_k or args.top_p):
        temperature = 1.0  # asking for top-k / top-p means sampling

    prompt = torch.tensor([ids], device=device)
    with tqdm(total=args.max_new_tokens, desc="generate", unit="tok") as bar:
        start = time.perf_counter()
        out = generate(model, prompt, args.max_new_tokens, temperature, args.top_k, args.top_p,
                       on_token=lambda step: bar.update(1))
        new = out[0, len(ids):].tolist()  # the one host transfer; also waits for the device
        seconds = time.perf_counter() - start
    rate = len(new) / seconds
    print(f"{len(new)} tokens in {seconds:.2f}s: {rate:.1f} tokens/s (prefill included)")
    print("ids:", new)
    if tok is not None:
        print(tok.decode(ids + new))
    return {"ids": new, "tokens_per_s": rate}


if __name__ == "__main__":
    main()
