"""Models and metrics from third-party libraries (diffusers, peft, einops, torchmetrics), used
unchanged with ``.to("tpu")``, give CPU's forward values, loss, gradients and optimizer step.

Every model is built from a tiny config with seeded random init (no weights are downloaded)
and the same state is copied to both devices. Dropout-like randomness is off (``eval()`` or a
zero rate): tpu draws from its own generator, so a random op is not comparable with CPU's.
The default suite keeps the cheap cases; whole UNets, fused eager and torch.compile sweeps are
slow (cold compiles of many shapes)."""

from __future__ import annotations

import copy

import pytest
import torch
from conftest import TPU, assert_same

import torchtpu


def _to_tpu(value):
    return value.to(TPU) if isinstance(value, torch.Tensor) else value


def _pair(module: torch.nn.Module) -> tuple[torch.nn.Module, torch.nn.Module]:
    return module, copy.deepcopy(module).to(TPU)


def _grads(module: torch.nn.Module) -> list:
    return [p.grad for p in module.parameters()]


def _check_train_step(cpu_model, tpu_model, loss_of, *, grad_atol=1e-5, step_atol=1e-5):
    """``loss_of(model, to_device)`` on both devices: the same loss, gradients (and which
    parameters have one), and parameters after one SGD step."""
    loss_cpu = loss_of(cpu_model, lambda v: v)
    loss_tpu = loss_of(tpu_model, _to_tpu)
    assert_same(loss_tpu, loss_cpu)
    loss_cpu.backward()
    loss_tpu.backward()
    grads_cpu, grads_tpu = _grads(cpu_model), _grads(tpu_model)
    assert [g is None for g in grads_tpu] == [g is None for g in grads_cpu]
    for got, want in zip(grads_tpu, grads_cpu, strict=True):
        if want is not None:
            assert_same(got, want, atol=grad_atol)
    for model in (cpu_model, tpu_model):
        torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.1).step()
    for got, want in zip(tpu_model.parameters(), cpu_model.parameters(), strict=True):
        assert_same(got, want, atol=step_atol)


# ---------------------------------------------------------------- einops


def _einops_functions(x):
    from einops import einsum, pack, rearrange, reduce, repeat, unpack

    packed, shapes = pack([x, x[:, 0]], "b * w")
    return [
        rearrange(x, "b c h w -> b (h w) c"),
        rearrange(x, "b c (h1 h2) w -> b h1 (c h2) w", h1=2),
        rearrange([x, x], "n b c h w -> b n c h w"),
        reduce(x, "b c h w -> b c", "mean"),
        reduce(x, "b c (h 2) (w 2) -> b c h w", "max"),
        reduce(x, "b c h w -> c", "sum"),
        reduce(x, "b c h w -> b h", "min"),
        reduce(x, "b c h w -> b w", "prod"),
        repeat(x, "b c h w -> b c h w k", k=2),
        repeat(x[0, 0], "h w -> (r h) w", r=3),
        einsum(x, x, "b c h w, b d h w -> b c d"),
        packed,
        *unpack(packed, shapes, "b * w"),
    ]


def _einops_model():
    from einops.layers.torch import EinMix, Rearrange, Reduce

    torch.manual_seed(0)
    return torch.nn.Sequential(
        Rearrange("b c (h p1) (w p2) -> b (h w) (p1 p2 c)", p1=2, p2=2),
        EinMix("b t c -> b t d", weight_shape="c d", bias_shape="d", c=12, d=8),
        torch.nn.GELU(),
        EinMix("b t d -> b u d", weight_shape="t u", t=6, u=4),
        Reduce("b t d -> b d", "mean"),
        torch.nn.Linear(8, 5),
    )


def test_einops_functions_match_cpu():
    pytest.importorskip("einops")
    x = torch.randn(2, 3, 4, 6, generator=torch.Generator().manual_seed(0))
    assert_same(_einops_functions(x.to(TPU)), _einops_functions(x))


def test_einops_layers_train_step_matches_cpu():
    pytest.importorskip("einops")
    x = torch.randn(2, 3, 4, 6, generator=torch.Generator().manual_seed(1))
    _check_train_step(*_pair(_einops_model()), lambda m, dev: m(dev(x)).pow(2).mean())


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["fused", "compile"])
def test_einops_fused_and_compiled_match_cpu(mode):
    pytest.importorskip("einops")
    x = torch.randn(2, 3, 4, 6, generator=torch.Generator().manual_seed(1))
    cpu_model, tpu_model = _pair(_einops_model())
    if mode == "compile":
        compiled = torch.compile(tpu_model, backend="tpu")
        _check_train_step(cpu_model, tpu_model,
                          lambda m, dev: (compiled if m is tpu_model else m)(dev(x)).pow(2).mean())
        functions = torch.compile(_einops_functions, backend="tpu")
        assert_same(functions(x.to(TPU)), _einops_functions(x), atol=2e-5)
        return
    with torchtpu.set_eager_mode("fused"):
        _check_train_step(cpu_model, tpu_model, lambda m, dev: m(dev(x)).pow(2).mean())
        assert_same(_einops_functions(x.to(TPU)), _einops_functions(x))


# ---------------------------------------------------------------- torchmetrics


def _metric_batches(kind: str) -> list[tuple[torch.Tensor, torch.Tensor]]:
    g = torch.Generator().manual_seed(0)
    if kind == "multiclass":
        return [(torch.randn(8, 4, generator=g).softmax(-1), torch.randint(0, 4, (8,), generator=g))
                for _ in range(3)]
    if kind == "binary":
        return [(torch.rand(8, generator=g), torch.randint(0, 2, (8,), generator=g))
                for _ in range(3)]
    return [(torch.randn(8, generator=g), torch.randn(8, generator=g)) for _ in range(3)]


_METRICS = {
    "accuracy": (lambda tm: tm.Accuracy(task="multiclass", num_classes=4), "multiclass"),
    "f1": (lambda tm: tm.F1Score(task="multiclass", num_classes=4, average="macro"),
           "multiclass"),
    "auroc": (lambda tm: tm.AUROC(task="binary"), "binary"),
    "auroc_multiclass": (lambda tm: tm.AUROC(task="multiclass", num_classes=4), "multiclass"),
    "mse": (lambda tm: tm.MeanSquaredError(), "regression"),
    "pearson": (lambda tm: tm.PearsonCorrCoef(), "regression"),
    "confusion_matrix": (lambda tm: tm.ConfusionMatrix(task="multiclass", num_classes=4),
                         "multiclass"),
}
_DEFAULT_METRICS = ("accuracy", "mse", "confusion_matrix")


def _metric_run(make, batches, device: str) -> list[torch.Tensor]:
    """Per-batch values (forward), the epoch's compute, then a reset and one more batch."""
    metric = make().to(device)
    values = [metric(preds.to(device), target.to(device)) for preds, target in batches]
    values.append(metric.compute())
    metric.reset()
    metric.update(batches[0][0].to(device), batches[0][1].to(device))
    values.append(metric.compute())
    return values


@pytest.mark.parametrize("name", [
    pytest.param(name, marks=() if name in _DEFAULT_METRICS else pytest.mark.slow)
    for name in _METRICS])
def test_torchmetrics_update_compute_reset_match_cpu(name):
    tm = pytest.importorskip("torchmetrics")
    make, kind = _METRICS[name]
    batches = _metric_batches(kind)
    got = _metric_run(lambda: make(tm), batches, TPU)
    assert all(v.device.type == "tpu" for v in got)
    assert_same(got, _metric_run(lambda: make(tm), batches, "cpu"))


@pytest.mark.slow
def test_torchmetrics_fused_match_cpu():
    tm = pytest.importorskip("torchmetrics")
    for make, kind in _METRICS.values():
        batches = _metric_batches(kind)
        with torchtpu.set_eager_mode("fused"):
            got = _metric_run(lambda make=make: make(tm), batches, TPU)
        assert_same(got, _metric_run(lambda make=make: make(tm), batches, "cpu"))


# ---------------------------------------------------------------- peft


def _causal_lm(kind: str):
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    if kind == "llama":
        config = transformers.LlamaConfig(
            vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
            num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=32)
    else:  # dropout off: tpu's draws are not CPU's
        config = transformers.GPT2Config(vocab_size=64, n_embd=16, n_layer=1, n_head=2,
                                         n_positions=32, resid_pdrop=0.0, embd_pdrop=0.0,
                                         attn_pdrop=0.0)
    return transformers.AutoModelForCausalLM.from_config(config)


def _check_lora(kind: str):
    peft = pytest.importorskip("peft")
    targets = ["q_proj", "v_proj"] if kind == "llama" else ["c_attn"]
    config = peft.LoraConfig(r=4, lora_alpha=8, target_modules=targets, lora_dropout=0.0,
                             init_lora_weights=False)  # non-zero B: the adapter changes outputs
    cpu_model, tpu_model = _pair(peft.get_peft_model(_causal_lm(kind), config))
    ids = torch.randint(0, 64, (2, 6), generator=torch.Generator().manual_seed(1))
    _check_train_step(cpu_model, tpu_model,
                      lambda m, dev: m(input_ids=dev(ids), labels=dev(ids)).loss)
    with_grad = [n for n, p in tpu_model.named_parameters() if p.grad is not None]
    assert with_grad and all("lora_" in n for n in with_grad)
    merged_cpu, merged_tpu = cpu_model.merge_and_unload(), tpu_model.merge_and_unload()
    assert not any("lora_" in n for n, _ in merged_tpu.named_parameters())
    with torch.no_grad():
        assert_same(merged_tpu(input_ids=ids.to(TPU)).logits, merged_cpu(input_ids=ids).logits)


def test_peft_lora_llama_matches_cpu():
    _check_lora("llama")


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["strict", "fused"])
def test_peft_lora_gpt2_matches_cpu(mode):
    with torchtpu.set_eager_mode(mode):
        _check_lora("gpt2")


@pytest.mark.slow
def test_peft_lora_llama_fused_matches_cpu():
    with torchtpu.set_eager_mode("fused"):
        _check_lora("llama")


@pytest.mark.slow
def test_peft_lora_compiled_forward_matches_cpu():
    peft = pytest.importorskip("peft")
    config = peft.LoraConfig(r=4, target_modules=["q_proj", "v_proj"], init_lora_weights=False)
    cpu_model, tpu_model = _pair(peft.get_peft_model(_causal_lm("llama"), config))
    compiled = torch.compile(tpu_model, backend="tpu")
    ids = torch.randint(0, 64, (2, 6), generator=torch.Generator().manual_seed(1))

    def loss_of(model, dev):
        run = compiled if model is tpu_model else model
        return run(input_ids=dev(ids), labels=dev(ids)).loss

    _check_train_step(cpu_model, tpu_model, loss_of)


# ---------------------------------------------------------------- diffusers


def _diffusers_model(name: str):
    diffusers = pytest.importorskip("diffusers")
    torch.manual_seed(0)
    if name == "unet2d":
        return diffusers.UNet2DModel(
            sample_size=8, in_channels=3, out_channels=3, layers_per_block=1,
            block_out_channels=(8, 16), down_block_types=("DownBlock2D", "AttnDownBlock2D"),
            up_block_types=("AttnUpBlock2D", "UpBlock2D"), norm_num_groups=4,
            attention_head_dim=4)
    if name == "unet2d_condition":
        return diffusers.UNet2DConditionModel(
            sample_size=8, in_channels=4, out_channels=4, layers_per_block=1,
            block_out_channels=(8, 16), down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"),
            up_block_types=("UpBlock2D", "CrossAttnUpBlock2D"), cross_attention_dim=12,
            norm_num_groups=4, attention_head_dim=4)
    if name == "autoencoder_kl":
        return diffusers.AutoencoderKL(
            in_channels=3, out_channels=3, down_block_types=("DownEncoderBlock2D",) * 2,
            up_block_types=("UpDecoderBlock2D",) * 2, block_out_channels=(8, 16),
            latent_channels=2, norm_num_groups=4, sample_size=8)
    # the cheapest denoiser: one conv block, enough for the scheduler loop
    return diffusers.UNet2DModel(
        sample_size=8, in_channels=3, out_channels=3, layers_per_block=1,
        block_out_channels=(4,), down_block_types=("DownBlock2D",),
        up_block_types=("UpBlock2D",), norm_num_groups=2, add_attention=False)


def _diffusers_inputs(name: str) -> tuple:
    g = torch.Generator().manual_seed(5)
    if name == "unet2d_condition":
        return (torch.randn(2, 4, 8, 8, generator=g), torch.tensor([3, 10]),
                torch.randn(2, 5, 12, generator=g))
    if name == "autoencoder_kl":
        return (torch.randn(2, 3, 8, 8, generator=g),)
    return torch.randn(2, 3, 8, 8, generator=g), torch.tensor([3, 10])


def _check_diffusers_model(name: str, compiled: bool = False):
    cpu_model, tpu_model = _pair(_diffusers_model(name))
    inputs = _diffusers_inputs(name)
    run_tpu = torch.compile(tpu_model, backend="tpu") if compiled else tpu_model
    with torch.no_grad():
        assert_same(run_tpu(*map(_to_tpu, inputs)).sample, cpu_model(*inputs).sample)

    def loss_of(model, dev):
        out = (run_tpu if model is tpu_model else model)(*map(dev, inputs)).sample
        return out.pow(2).mean()

    _check_train_step(cpu_model, tpu_model, loss_of)


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["strict", "fused", "compile"])
@pytest.mark.parametrize("name", ["unet2d", "unet2d_condition", "autoencoder_kl"])
def test_diffusers_model_train_step_matches_cpu(name, mode):
    if mode == "compile":
        _check_diffusers_model(name, compiled=True)
        return
    with torchtpu.set_eager_mode(mode):
        _check_diffusers_model(name)


def _denoise(scheduler_name: str, device: str) -> torch.Tensor:
    diffusers = pytest.importorskip("diffusers")
    scheduler = getattr(diffusers, scheduler_name)(num_train_timesteps=50)
    scheduler.set_timesteps(3, device=device)
    model = _diffusers_model("tiny").to(device)
    g = torch.Generator().manual_seed(1)
    x = (torch.randn(2, 3, 8, 8, generator=g) * scheduler.init_noise_sigma).to(device)
    # DDPM's step adds noise; a CPU generator draws it on CPU (diffusers' randn_tensor), the
    # same numbers for both devices.
    noise = {"generator": torch.Generator().manual_seed(2)} \
        if scheduler_name == "DDPMScheduler" else {}
    with torch.no_grad():
        for t in scheduler.timesteps:
            eps = model(scheduler.scale_model_input(x, t), t).sample
            x = scheduler.step(eps, t, x, **noise).prev_sample
    return x


# slow: the training step below runs the same denoiser and add_noise in the default suite
@pytest.mark.slow
@pytest.mark.parametrize("scheduler_name", ["DDPMScheduler", "DDIMScheduler"])
def test_diffusers_denoising_loop_matches_cpu(scheduler_name):
    assert_same(_denoise(scheduler_name, TPU), _denoise(scheduler_name, "cpu"))


def test_diffusers_noise_prediction_train_step_matches_cpu():
    diffusers = pytest.importorskip("diffusers")
    scheduler = diffusers.DDPMScheduler(num_train_timesteps=50)
    g = torch.Generator().manual_seed(3)
    clean, noise = torch.randn(2, 3, 8, 8, generator=g), torch.randn(2, 3, 8, 8, generator=g)
    steps = torch.randint(0, 50, (2,), generator=g)

    def loss_of(model, dev):
        noisy = scheduler.add_noise(dev(clean), dev(noise), dev(steps))
        return torch.nn.functional.mse_loss(model(noisy, dev(steps)).sample, dev(noise))

    _check_train_step(*_pair(_diffusers_model("tiny")), loss_of)
