"""How to take a causal LM apart: embedding -> blocks -> norm -> head, and how to call a block.

The engine never touches a model's forward. An adapter names the resident modules (everything
that is not a block), lists the blocks, and runs the pieces on device copies of them.
"""

from __future__ import annotations

import inspect
from typing import Any

import torch
from torch import nn


class ModelAdapter:
    """Base adapter for models laid out as attribute paths; subclasses say how to run a block."""

    blocks_path: str = "model.layers"
    # role -> attribute path; every parameter outside the blocks must belong to one of these
    resident_paths: dict[str, str] = {}

    def __init__(self, model: nn.Module) -> None:
        self.model = model

    def blocks(self) -> list[nn.Module]:
        return list(self.model.get_submodule(self.blocks_path))

    def residents(self) -> nn.ModuleDict:
        """The non-block modules, by role (shared with the model, not copies)."""
        return nn.ModuleDict({role: self.model.get_submodule(path)
                              for role, path in self.resident_paths.items()})

    def check_coverage(self) -> None:
        """Fail early when a parameter would be neither streamed nor resident (never trained)."""
        covered = {id(p) for b in self.blocks() for p in b.parameters()}
        covered |= {id(p) for p in self.residents().parameters()}
        missing = [n for n, p in self.model.named_parameters() if id(p) not in covered]
        if missing:
            raise ValueError(f"offload: {type(self).__name__} does not cover parameters "
                             f"{missing[:5]}; add their module to resident_paths")

    # -- run on device copies (`res` is the device copy of `residents()`) -----------------
    def embed(self, res: nn.ModuleDict, input_ids: torch.Tensor) -> torch.Tensor:
        return res["embed"](input_ids)

    def context(self, res: nn.ModuleDict, hidden: torch.Tensor,
                input_ids: torch.Tensor) -> dict[str, Any]:
        """Per-forward values every block needs (positions, rotary tables, masks)."""
        return {}

    def call_block(self, block: nn.Module, hidden: torch.Tensor,
                   ctx: dict[str, Any]) -> torch.Tensor:
        out = block(hidden, **ctx)
        return out[0] if isinstance(out, tuple) else out

    def head(self, res: nn.ModuleDict, hidden: torch.Tensor) -> torch.Tensor:
        return res["head"](res["norm"](hidden))

    # -- shape facts for the pre-flight estimate ------------------------------------------
    def dims(self) -> dict[str, int]:
        """hidden, intermediate, heads, vocab (best effort; used only for estimates)."""
        cfg = getattr(self.model, "config", None)
        return {
            "hidden": getattr(cfg, "hidden_size", 0),
            "intermediate": getattr(cfg, "intermediate_size", 0),
            "heads": getattr(cfg, "num_attention_heads", 0),
            "vocab": getattr(cfg, "vocab_size", 0),
        }

    def hf_state_dict(self) -> dict[str, torch.Tensor]:
        """The model's tensors under Hugging Face names, tied copies left out."""
        return dict(self.model.state_dict())

    def hf_config(self) -> dict[str, Any] | None:
        cfg = getattr(self.model, "config", None)
        return cfg.to_dict() if hasattr(cfg, "to_dict") else None


class HFCausalLMAdapter(ModelAdapter):
    """Hugging Face *ForCausalLM models of the Llama family (Llama, Qwen2/3, Mistral, ...)."""

    blocks_path = "model.layers"
    resident_paths = {"embed": "model.embed_tokens", "norm": "model.norm",
                      "head": "lm_head", "rotary": "model.rotary_emb"}

    def context(self, res: nn.ModuleDict, hidden: torch.Tensor,
                input_ids: torch.Tensor) -> dict[str, Any]:
        from transformers.masking_utils import create_causal_mask

        positions = torch.arange(hidden.shape[1], device=hidden.device).unsqueeze(0)
        # transformers renamed past_key_values to cache; neither is used here
        cache_arg = "cache" if "cache" in inspect.signature(create_causal_mask).parameters \
            else "past_key_values"
        no_cache = {cache_arg: None}
        mask = create_causal_mask(config=self.model.config, inputs_embeds=hidden,
                                  attention_mask=None, position_ids=positions, **no_cache)
        return {"attention_mask": mask, "position_ids": positions,
                "position_embeddings": res["rotary"](hidden, position_ids=positions)}

    def hf_state_dict(self) -> dict[str, torch.Tensor]:
        sd = dict(self.model.state_dict())
        if getattr(self.model.config, "tie_word_embeddings", False):
            sd.pop("lm_head.weight", None)
        return sd


class LlamaAdapter(ModelAdapter):
    """Our `torchtpu.models.llama.Llama` (and Qwen, which is the same class)."""

    blocks_path = "layers"
    resident_paths = {"embed": "embed_tokens", "norm": "norm", "head": "lm_head",
                      "rope": "rope"}

    def context(self, res: nn.ModuleDict, hidden: torch.Tensor,
                input_ids: torch.Tensor) -> dict[str, Any]:
        return {"rope": res["rope"](torch.arange(hidden.shape[1], device=hidden.device))}

    def call_block(self, block: nn.Module, hidden: torch.Tensor,
                   ctx: dict[str, Any]) -> torch.Tensor:
        return block(hidden, ctx["rope"])

    def dims(self) -> dict[str, int]:
        c = self.model.config
        return {"hidden": c.hidden_size, "intermediate": c.intermediate_size,
                "heads": c.n_heads, "vocab": c.vocab_size}

    def hf_state_dict(self) -> dict[str, torch.Tensor]:
        from torchtpu.models.checkpoint import _hf_name

        tied = self.model.config.tie_word_embeddings
        return {_hf_name(k): v for k, v in self.model.state_dict().items()
                if not (tied and k == "lm_head.weight")}

    def hf_config(self) -> dict[str, Any] | None:
        from torchtpu.models.checkpoint import config_to_hf

        return config_to_hf(self.model.config, self.model.embed_tokens.weight.dtype)


def adapter_for(model: nn.Module) -> ModelAdapter:
    """Pick the adapter for a model by its layout."""
    from torchtpu.models.llama import Llama

    if isinstance(model, Llama):
        return LlamaAdapter(model)
    inner = getattr(model, "model", None)
    if (inner is not None and hasattr(inner, "layers") and hasattr(inner, "embed_tokens")
            and hasattr(model, "lm_head")):
        return HFCausalLMAdapter(model)
    raise ValueError(f"offload: no adapter for {type(model).__name__}; pass adapter= "
                     "(see torchtpu/offload/adapters.py)")
