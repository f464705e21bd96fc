"""Reference models in plain PyTorch: gpt, llama, qwen, resnet, unet, dlrm.

Nothing here imports the torchtpu runtime (imports inside this package are relative), so each
file can be read, tested and vendored as ordinary PyTorch. ``checkpoint`` loads and saves
Hugging Face safetensors directories; ``generate`` decodes with a KV cache.
"""
