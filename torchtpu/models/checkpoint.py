"""Hugging Face checkpoint directories <-> our Llama / Qwen models. safetensors only.

A directory holds ``config.json`` and either ``model.safetensors`` or shards listed in
``model.safetensors.index.json``. Parameter names are HF's with the ``model.`` prefix dropped
(``lm_head.weight`` keeps its name); see docs/models.md for the full mapping.

Loading checks everything it can before reading a single tensor (config, files, headers,
names, shapes), then streams tensor by tensor onto the target device into a model built on
``meta``, so the weights exist once, on the device, and a bad checkpoint never leaves a
half-loaded model behind.
"""

from __future__ import annotations

import json
import os
from contextlib import ExitStack
from dataclasses import asdict, fields
from pathlib import Path

import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import save_file

from torchtpu.models.llama import Llama, Llama3RopeScaling, LlamaConfig

ARCHITECTURES = {"llama": "LlamaForCausalLM", "qwen2": "Qwen2ForCausalLM",
                 "qwen3": "Qwen3ForCausalLM"}
INDEX_NAME = "model.safetensors.index.json"
SINGLE_NAME = "model.safetensors"
# Non-persistent buffers that some older exports wrote anyway; we derive them from the config.
IGNORED_TENSORS = (".rotary_emb.inv_freq",)
# HF config key -> our LlamaConfig field.
CONFIG_KEYS = {
    "vocab_size": "vocab_size", "hidden_size": "hidden_size",
    "intermediate_size": "intermediate_size", "num_hidden_layers": "n_layers",
    "num_attention_heads": "n_heads", "num_key_value_heads": "n_kv_heads",
    "head_dim": "head_dim", "rms_norm_eps": "rms_norm_eps",
    "max_position_embeddings": "max_seq_len", "tie_word_embeddings": "tie_word_embeddings",
}
# Keys we read or rewrite ourselves, so they are not carried in `extra`.
HANDLED_KEYS = {*CONFIG_KEYS, "rope_parameters", "rope_scaling", "rope_theta", "model_type",
                "architectures", "attention_bias", "hidden_act", "mlp_bias", "use_sliding_window",
                "dtype", "torch_dtype", "transformers_version"}


class CheckpointError(ValueError):
    """A checkpoint directory that does not match what we can load."""


def config_from_hf(hf: dict, source: str = "config.json") -> LlamaConfig:
    """Translate a HF Llama / Qwen2 / Qwen3 config dict; `source` names it in errors."""
    model_type = hf.get("model_type")
    if model_type not in ARCHITECTURES:
        raise CheckpointError(f"{source}: model_type {model_type!r} is not supported; expected "
                              f"one of {sorted(ARCHITECTURES)}")

    def refuse(key, value, want):
        if hf.get(key, want) != want:
            raise CheckpointError(f"{source}: {key}={value!r} is not supported (expected {want!r})")

    refuse("hidden_act", hf.get("hidden_act"), "silu")
    refuse("mlp_bias", hf.get("mlp_bias"), False)
    refuse("use_sliding_window", hf.get("use_sliding_window"), False)
    if model_type != "qwen2":  # HF Llama / Qwen3 also put a bias on o_proj; we don't model it
        refuse("attention_bias", hf.get("attention_bias"), False)

    # transformers 5 writes rope_parameters; older configs, rope_theta + rope_scaling.
    rope = dict(hf.get("rope_parameters") or hf.get("rope_scaling") or {})
    theta = rope.get("rope_theta", hf.get("rope_theta", 10000.0))
    rope_type = rope.get("rope_type", rope.get("type", "default"))
    scaling = None
    if rope_type == "llama3":
        try:
            scaling = Llama3RopeScaling(**{f.name: rope[f.name] for f in fields(Llama3RopeScaling)})
        except KeyError as e:
            raise CheckpointError(f"{source}: llama3 rope scaling lacks {e.args[0]!r}") from None
    elif rope_type != "default":
        raise CheckpointError(f"{source}: rope_type {rope_type!r} is not supported; expected "
                              "'default' or 'llama3'")

    kw = {ours: hf[theirs] for theirs, ours in CONFIG_KEYS.items() if hf.get(theirs) is not None}
    missing = {"vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers",
               "num_attention_heads"} - hf.keys()
    if missing:
        raise CheckpointError(f"{source}: missing required keys {sorted(missing)}")
    kw.setdefault("n_kv_heads", kw["n_heads"])
    kw.setdefault("tie_word_embeddings", False)
    return LlamaConfig(
        **kw, rope_theta=float(theta), rope_scaling=scaling,
        attention_bias=model_type == "qwen2", qk_norm=model_type == "qwen3",
        extra={k: v for k, v in hf.items() if k not in HANDLED_KEYS},
    )


def config_to_hf(cfg: LlamaConfig, dtype: torch.dtype = torch.float32) -> dict:
    """The config.json transformers 5 would write for this model."""
    if cfg.attention_bias and cfg.qk_norm:
        raise CheckpointError("no HF architecture has both q/k/v biases and q/k norms")
    model_type = "qwen2" if cfg.attention_bias else "qwen3" if cfg.qk_norm else "llama"
    rope = {"rope_theta": cfg.rope_theta, "rope_type": "default"}
    if cfg.rope_scaling is not None:
        rope = {**rope, "rope_type": "llama3", **asdict(cfg.rope_scaling)}
    hf = {theirs: getattr(cfg, ours) for theirs, ours in CONFIG_KEYS.items()}
    hf.update(cfg.extra)
    hf.update(architectures=[ARCHITECTURES[model_type]], model_type=model_type,
              hidden_act="silu", rope_parameters=rope, dtype=str(dtype).removeprefix("torch."))
    if model_type != "qwen2":
        hf["attention_bias"] = False
    return hf


def _hf_name(ours: str) -> str:
    return ours if ours.startswith("lm_head.") else "model." + ours


def _weight_files(path: Path) -> dict[str, Path]:
    """Map each HF tensor name to its file, checking every named file exists and opens."""
    index = path / INDEX_NAME
    if index.exists():
        try:
            weight_map = json.loads(index.read_text())["weight_map"]
        except (json.JSONDecodeError, KeyError) as e:
            raise CheckpointError(f"{index}: not a safetensors index with a weight_map "
                                  f"({e})") from e
        files = sorted(set(weight_map.values()))
    elif (path / SINGLE_NAME).exists():
        weight_map, files = None, [SINGLE_NAME]
    else:
        pickles = sorted(p.name for p in path.glob("*.bin")) + sorted(
            p.name for p in path.glob("*.pt*"))
        hint = f" (found {pickles}: pickle formats are refused)" if pickles else ""
        raise FileNotFoundError(f"{path}: expected {SINGLE_NAME} or {INDEX_NAME}{hint}")
    located: dict[str, Path] = {}
    for name in files:
        file = path / name
        if not file.exists():
            raise FileNotFoundError(f"{file}: listed in {INDEX_NAME} but missing")
        try:
            with safe_open(file, framework="pt") as f:
                keys = list(f.keys())
        except SafetensorError as e:
            raise CheckpointError(f"{file}: not a readable safetensors file ({e})") from e
        for key in keys:
            located[key] = file
    if weight_map is not None:
        for key, name in weight_map.items():
            if located.get(key) != path / name:
                raise CheckpointError(f"{path / name}: {INDEX_NAME} lists {key!r} here, "
                                      "but the file does not hold it")
    return located


def load_pretrained(path: str | os.PathLike, device: torch.device | str = "cpu",
                    dtype: torch.dtype | None = None) -> Llama:
    """Load a HF Llama / Qwen2 / Qwen3 checkpoint directory into a ``Llama`` on `device`.

    dtype None keeps each tensor's stored dtype. Raises FileNotFoundError or CheckpointError
    naming the file and the problem; nothing is loaded unless everything checks out.
    """
    path = Path(path)
    cfg_file = path / "config.json"
    if not cfg_file.exists():
        raise FileNotFoundError(f"{cfg_file}: missing; a checkpoint directory needs config.json")
    try:
        cfg = config_from_hf(json.loads(cfg_file.read_text()), str(cfg_file))
    except json.JSONDecodeError as e:
        raise CheckpointError(f"{cfg_file}: not valid JSON ({e})") from e
    located = _weight_files(path)

    with torch.device("meta"):
        model = Llama(cfg)
    expected = {_hf_name(k): v.shape for k, v in model.state_dict().items()}
    if cfg.tie_word_embeddings:
        del expected["lm_head.weight"]  # HF omits the tied copy; if present it is ignored
    present = {k for k in located if not k.endswith(IGNORED_TENSORS)}
    if cfg.tie_word_embeddings:
        present.discard("lm_head.weight")
    missing, unexpected = sorted(expected.keys() - present), sorted(present - expected.keys())
    if missing or unexpected:
        raise CheckpointError(f"{path}: tensors do not match config.json "
                              f"({cfg.n_layers} layers): missing {missing[:8]}"
                              f"{' ...' if len(missing) > 8 else ''}, unexpected {unexpected[:8]}"
                              f"{' ...' if len(unexpected) > 8 else ''}")
    try:
        with ExitStack() as stack:
            state = _read_tensors(stack, located, expected, device, dtype)
    except SafetensorError as e:
        raise CheckpointError(f"{path}: reading tensors failed ({e})") from e
    if cfg.tie_word_embeddings:
        state["lm_head.weight"] = state["embed_tokens.weight"]
    model.load_state_dict(state, strict=True, assign=True)
    if cfg.tie_word_embeddings:  # assign=True wrapped each key in its own Parameter: re-tie
        model.lm_head.weight = model.embed_tokens.weight
    return model


def _read_tensors(stack: ExitStack, located: dict[str, Path], expected: dict[str, torch.Size],
                  device, dtype) -> dict[str, torch.Tensor]:
    handles = {f: stack.enter_context(safe_open(f, framework="pt", device="cpu"))
               for f in sorted(set(located.values()))}
    for name, shape in expected.items():
            got = tuple(handles[located[name]].get_slice(name).get_shape())
            if got != tuple(shape):
                raise CheckpointError(f"{located[name]}: tensor {name!r} has shape {list(got)}, "
                                      f"expected {list(shape)} from config.json")
    state = {}
    for name in expected:  # one tensor at a time: read from the mmap, then to the device
        t = handles[located[name]].get_tensor(name)
        state[name.removeprefix("model.")] = t.to(device=device, dtype=dtype or t.dtype)
    return state


def save_pretrained(model: Llama, path: str | os.PathLike,
                    max_shard_bytes: int = 5 * 2**30) -> None:
    """Write `model` as a HF checkpoint directory that transformers' from_pretrained loads.

    Tensors go to the host one shard at a time, so a device-resident model needs only one
    shard of host memory. Shards follow HF's ``model-0000i-of-0000n.safetensors`` naming.
    """
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    cfg = model.config
    named = [(_hf_name(k), v) for k, v in model.state_dict().items()
             if not (cfg.tie_word_embeddings and k == "lm_head.weight")]
    shards: list[list[tuple[str, torch.Tensor]]] = [[]]
    size = 0
    for name, t in named:
        nbytes = t.numel() * t.element_size()
        if shards[-1] and size + nbytes > max_shard_bytes:
            shards.append([])
            size = 0
        shards[-1].append((name, t))
        size += nbytes
    dtype = named[0][1].dtype
    (path / "config.json").write_text(json.dumps(config_to_hf(cfg, dtype), indent=2) + "\n")
    if len(shards) == 1:
        file_names = [SINGLE_NAME]
    else:
        file_names = [f"model-{i + 1:05d}-of-{len(shards):05d}.safetensors"
                      for i in range(len(shards))]
    weight_map = {}
    for file_name, shard in zip(file_names, shards, strict=True):
        tensors = {n: t.detach().to("cpu").contiguous() for n, t in shard}
        save_file(tensors, path / file_name, metadata={"format": "pt"})
        weight_map.update(dict.fromkeys(tensors, file_name))
    if len(shards) > 1:
        total = sum(t.numel() * t.element_size() for _, t in named)
        index = {"metadata": {"total_size": total}, "weight_map": weight_map}
        (path / INDEX_NAME).write_text(json.dumps(index, indent=2) + "\n")
