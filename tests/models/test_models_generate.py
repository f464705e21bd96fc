import torch

from torchtpu.models.generate import generate, sample_next
from torchtpu.models.llama import Llama, LlamaConfig


def _model():
    torch.manual_seed(0)
    return Llama(LlamaConfig.tiny(vocab_size=64)).eval()


def test_greedy_with_cache_matches_recomputing_everything():
    model = _model()
    prompt = torch.randint(0, 64, (2, 5))
    out = generate(model, prompt, max_new_tokens=12)
    ref = prompt
    with torch.no_grad():
        for _ in range(12):
            ref = torch.cat([ref, model(ref)[0][:, -1].argmax(-1, keepdim=True)], dim=1)
    assert torch.equal(out, ref)


def test_top_k_one_and_tiny_top_p_are_greedy():
    logits = torch.randn(4, 50)
    greedy = logits.argmax(-1, keepdim=True)
    assert torch.equal(sample_next(logits, 1.0, top_k=1), greedy)
    assert torch.equal(sample_next(logits, 1.0, top_p=1e-6), greedy)


def test_top_k_and_top_p_keep_only_the_allowed_tokens():
    # Probabilities 0.5, 0.3, 0.15, 0.05: top_p=0.7 keeps the first two, top_k=3 the first three.
    logits = torch.tensor([[0.5, 0.3, 0.15, 0.05]]).log().repeat(2000, 1)
    torch.manual_seed(0)
    assert set(sample_next(logits, top_p=0.7).unique().tolist()) == {0, 1}
    assert set(sample_next(logits, top_k=3).unique().tolist()) == {0, 1, 2}
    assert set(sample_next(logits).unique().tolist()) == {0, 1, 2, 3}


def test_sampling_is_seeded():
    model = _model()
    prompt = torch.zeros(1, 3, dtype=torch.long)
    runs = []
    for _ in range(2):
        torch.manual_seed(5)
        runs.append(generate(model, prompt, 8, temperature=1.0, top_k=20, top_p=0.9))
    assert torch.equal(*runs)
