import torch

from torchtpu.models.dlrm import DLRM, DLRMConfig


def _batch(cfg, b=16, bag=3, seed=0):
    g = torch.Generator().manual_seed(seed)
    dense = torch.randn(b, cfg.num_dense, generator=g)
    sparse = torch.stack([torch.randint(0, n, (b, bag), generator=g) for n in cfg.table_sizes], 1)
    return dense, sparse


def test_shapes_and_interaction_width():
    cfg = DLRMConfig.tiny()
    model = DLRM(cfg)
    # bottom output (8) + 4 choose 2 dot products
    assert model.top[0].in_features == 8 + 6
    logits, loss = model(*_batch(cfg), labels=torch.ones(16))
    assert logits.shape == (16,) and loss.ndim == 0


def test_embedding_bags_sum():
    cfg = DLRMConfig.tiny()
    model = DLRM(cfg)
    ids = torch.tensor([[3, 5]])
    torch.testing.assert_close(model.tables[0](ids)[0],
                               model.tables[0].weight[3] + model.tables[0].weight[5])


def test_learns_a_rule_from_one_table():
    torch.manual_seed(0)
    cfg = DLRMConfig.tiny()
    model = DLRM(cfg)
    dense, sparse = _batch(cfg, b=64)
    labels = (sparse[:, 0, 0] % 2).float()  # click iff first id of table 0 is odd
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    for _ in range(60):
        _, loss = model(dense, sparse, labels)
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert loss.item() < 0.3


def test_mlperf_builds_on_meta():
    """22.8B embedding parameters: never materialised, but the wiring must hold at scale."""
    with torch.device("meta"):
        model = DLRM(DLRMConfig.mlperf_criteo_1tb())
    assert model.top[0].in_features == 128 + 27 * 26 // 2
    n = sum(p.numel() for p in model.parameters())
    assert 22.7e9 < n < 22.9e9
