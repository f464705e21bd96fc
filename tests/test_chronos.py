"""chronos-forecasting's pipelines used unchanged on "tpu", built from tiny randomly initialised
configurations (no weights are downloaded): the original Chronos (a T5 over mean-scaled,
uniformly binned tokens; ``predict`` samples through Hugging Face ``generate``, here with
``top_k=1`` so every sample is the argmax and CPU's draws need not be reproduced, over a
horizon longer than the model's, so predictions are fed back as context; ``embed``) and
Chronos-Bolt (patch embedding, instance norm, quantile heads; ``predict`` past the model's
horizon, which takes ``torch.quantile`` of the quantile-by-quantile rollouts, and
``predict_quantiles``) and Chronos-2 (time and group attention, eager and SDPA, multivariate
and cross-learning ``predict``) give CPU's forecasts on series with missing values, and their
training losses, gradients and AdamW steps match CPU. All tests are ``slow`` (importing the package
takes ~9 s, and the models' cold compiles more)."""

from __future__ import annotations

import copy

import pytest
import torch
from model_zoo_checks import check_outputs

TOL = dict(rtol=1e-4, atol=1e-4)
T5 = dict(d_model=16, d_ff=32, d_kv=4, num_heads=4, num_layers=1, num_decoder_layers=1,
          dropout_rate=0.0, relative_attention_num_buckets=8)
N_TOKENS = 64
_g = torch.Generator().manual_seed(0)
CONTEXT = torch.cumsum(torch.randn(3, 20, generator=_g), -1) + 5
CONTEXT[1, :4] = float("nan")
FUTURE = torch.randn(3, 4, generator=_g)


def _chronos():
    chronos = pytest.importorskip("chronos")
    from transformers import T5Config, T5ForConditionalGeneration

    config = chronos.ChronosConfig(
        tokenizer_class="MeanScaleUniformBins",
        tokenizer_kwargs=dict(low_limit=-15.0, high_limit=15.0), context_length=20,
        prediction_length=4, n_tokens=N_TOKENS, n_special_tokens=2, pad_token_id=0,
        eos_token_id=1, use_eos_token=True, model_type="seq2seq", num_samples=3,
        temperature=1.0, top_k=1, top_p=1.0)
    torch.manual_seed(0)
    t5 = T5ForConditionalGeneration(T5Config(vocab_size=N_TOKENS, pad_token_id=0,
                                             eos_token_id=1, decoder_start_token_id=0, **T5))
    return chronos, config, t5.eval()


def _bolt():
    chronos = pytest.importorskip("chronos")
    from chronos.chronos_bolt import ChronosBoltModelForForecasting
    from transformers import T5Config

    config = T5Config(**T5, dense_act_fn="relu", feed_forward_proj="relu",
                      is_encoder_decoder=True, decoder_start_token_id=0, pad_token_id=0,
                      initializer_factor=0.05,
                      chronos_config=dict(context_length=16, prediction_length=4,
                                          input_patch_size=4, input_patch_stride=4,
                                          quantiles=[0.1, 0.5, 0.9], use_reg_token=True))
    torch.manual_seed(0)
    return chronos, ChronosBoltModelForForecasting(config).eval()


def _train(model, loss_of, device):
    model = copy.deepcopy(model).to(device).train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    losses, grads = [], []
    for _ in range(2):
        loss = loss_of(model, device)
        loss.backward()
        grads.append([p.grad.clone() for p in model.parameters() if p.grad is not None])
        opt.step()
        opt.zero_grad()
        losses.append(loss.detach())
    return losses, grads, list(model.parameters())


@pytest.mark.slow
def test_chronos_predict_and_embed_match_cpu():
    chronos, config, t5 = _chronos()

    def run(device):
        pipeline = chronos.ChronosPipeline(
            tokenizer=config.create_tokenizer(),
            model=chronos.ChronosModel(config, copy.deepcopy(t5).to(device)))
        return pipeline.predict(CONTEXT, prediction_length=6), pipeline.embed(CONTEXT)

    check_outputs(run, **TOL)


@pytest.mark.slow
def test_chronos_training_matches_cpu():
    _, config, t5 = _chronos()
    tokenizer = config.create_tokenizer()

    def loss_of(model, device):
        ids, mask, scale = tokenizer.context_input_transform(CONTEXT)
        labels, label_mask = tokenizer.label_input_transform(FUTURE, scale)
        labels[~label_mask] = -100
        return model(input_ids=ids.to(device), attention_mask=mask.to(device),
                     labels=labels.to(device)).loss

    check_outputs(lambda d: _train(t5, loss_of, d), **TOL)


@pytest.mark.slow
def test_bolt_predict_matches_cpu():
    chronos, bolt = _bolt()

    def run(device):
        pipeline = chronos.ChronosBoltPipeline(model=copy.deepcopy(bolt).to(device))
        return (pipeline.predict(CONTEXT, prediction_length=10),
                pipeline.predict_quantiles(CONTEXT, prediction_length=4,
                                           quantile_levels=[0.25, 0.5]))

    check_outputs(run, **TOL)


@pytest.mark.slow
def test_bolt_training_matches_cpu():
    _, bolt = _bolt()
    check_outputs(lambda d: _train(bolt, lambda m, dev: m(context=CONTEXT.to(dev),
                                                          target=FUTURE[:, :3].to(dev)).loss, d),
                  **TOL)


def _chronos2(attention):
    chronos = pytest.importorskip("chronos")
    from chronos.chronos2.config import Chronos2CoreConfig

    config = Chronos2CoreConfig(
        d_model=16, d_kv=4, d_ff=32, num_layers=1, num_heads=4, dropout_rate=0.0,
        attn_implementation=attention,
        chronos_config=dict(context_length=16, output_patch_size=4, input_patch_size=4,
                            input_patch_stride=4, quantiles=[i / 10 for i in range(1, 10)],
                            use_reg_token=True, use_arcsinh=True, max_output_patches=2))
    torch.manual_seed(0)
    return chronos, chronos.Chronos2Model(config).eval()


@pytest.mark.slow
@pytest.mark.parametrize("attention", ["eager", "sdpa"])
def test_chronos2_predict_and_training_match_cpu(attention):
    chronos, model = _chronos2(attention)
    series = torch.stack([CONTEXT, CONTEXT.flip(-1) * 0.5], 1)  # (batch, variates, time)

    def run(device):
        pipeline = chronos.Chronos2Pipeline(model=copy.deepcopy(model).to(device))
        return (pipeline.predict(series, prediction_length=6),
                pipeline.predict(list(CONTEXT), prediction_length=12, cross_learning=True))

    def loss_of(m, device):
        return m(context=CONTEXT.to(device), future_target=FUTURE.repeat(1, 2).to(device),
                 num_output_patches=2, group_ids=torch.tensor([0, 0, 1]).to(device)).loss

    check_outputs(run, **TOL)
    check_outputs(lambda d: _train(model, loss_of, d), **TOL)
