"""test_huggingface_sweep.py's check for transformers' non-text architectures (image
classification, segmentation, detection, audio, speech-to-text, image-text, time series):
tiny random-weight models run a forward and backward on tpu, in strict eager, fused eager and
under torch.compile, and give CPU's loss, logits and gradients. Slow: `make test-slow`."""

from __future__ import annotations

import copy
import dataclasses

import pytest
import torch
from test_huggingface_sweep import _SMALL, _assert_matches, _run, _run_on_tpu

transformers = pytest.importorskip("transformers")

pytestmark = pytest.mark.slow

# transformers' detection loss imports this torch-only helper only when Pillow is installed.
_detection_loss = pytest.importorskip("transformers.loss.loss_for_object_detection")
if not hasattr(_detection_loss, "center_to_corners_format"):
    from transformers.image_transforms import center_to_corners_format

    _detection_loss.center_to_corners_format = center_to_corners_format

_IMAGE = dict(image_size=32, num_channels=3, num_labels=3)
_VIT = dict(_IMAGE, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
            intermediate_size=37, patch_size=8)
_SWIN = dict(_IMAGE, patch_size=4, embed_dim=8, depths=[1, 1], num_heads=[2, 2], window_size=4)
_STAGES4 = dict(hidden_sizes=[8, 16, 16, 32], depths=[1, 1, 1, 1])
_SEGFORMER = dict(_IMAGE, **_STAGES4, num_attention_heads=[1, 1, 2, 2], decoder_hidden_size=16)
_RESNET = dict(_IMAGE, embedding_size=8, hidden_sizes=[8, 16], depths=[1, 1])
_AUDIO = dict(vocab_size=32, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
              intermediate_size=37, conv_dim=[16, 16, 16], conv_stride=[4, 4, 4],
              conv_kernel=[8, 8, 8], num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=2,
              classifier_proj_size=16, num_labels=3, tdnn_dim=[16, 16], tdnn_kernel=[3, 3],
              tdnn_dilation=[1, 2], xvector_output_dim=16, codevector_dim=16,
              proj_codevector_dim=16)
_TEXT_TOWER = dict(vocab_size=99, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                   intermediate_size=37, max_position_embeddings=64)
_VISION_TOWER = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                     intermediate_size=37, image_size=32, patch_size=8)
_SERIES = dict(prediction_length=4, context_length=8, lags_sequence=[1, 2], num_time_features=1,
               d_model=16, encoder_layers=2, decoder_layers=2, encoder_attention_heads=2,
               decoder_attention_heads=2, encoder_ffn_dim=16, decoder_ffn_dim=16)
_DETR = dict(d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
             decoder_attention_heads=4, encoder_ffn_dim=37, decoder_ffn_dim=37, num_queries=5,
             num_labels=3, backbone_config=None)


def _backbone(model_type: str, **kwargs):
    return transformers.AutoConfig.for_model(model_type, **kwargs)


# name -> (model_type, Auto class name, configuration, inputs kind, output to compare)
_SPECS = {
    "swin": ("swin", "AutoModelForImageClassification", _SWIN, "image", "logits"),
    "swinv2": ("swinv2", "AutoModelForImageClassification", _SWIN, "image", "logits"),
    "deit": ("deit", "DeiTForImageClassification", _VIT, "image", "logits"),
    "resnet": ("resnet", "AutoModelForImageClassification", _RESNET, "image", "logits"),
    "regnet": ("regnet", "AutoModelForImageClassification", dict(_RESNET, groups_width=4),
               "image", "logits"),
    "bit": ("bit", "AutoModelForImageClassification",
            dict(_RESNET, hidden_sizes=[8, 16, 32, 64], depths=[1, 1, 1, 1], num_groups=1),
            "image", "logits"),
    "efficientnet": ("efficientnet", "AutoModelForImageClassification",
                     dict(_IMAGE, kernel_sizes=[3, 3, 5], in_channels=[32, 16, 24],
                          out_channels=[16, 24, 40], strides=[1, 1, 2], num_block_repeats=[1, 1, 2],
                          expand_ratios=[1, 6, 6], hidden_dim=320, width_coefficient=0.25,
                          depth_coefficient=0.5),
                     "image", "logits"),
    "mobilenet_v1": ("mobilenet_v1", "AutoModelForImageClassification",
                     dict(_IMAGE, depth_multiplier=0.25, min_depth=8), "image", "logits"),
    "mobilevit": ("mobilevit", "AutoModelForImageClassification",
                  dict(_IMAGE, patch_size=2, hidden_sizes=[16, 24, 32],
                       neck_hidden_sizes=[8, 8, 16, 16, 24, 32, 40], aspp_out_channels=16),
                  "image", "logits"),
    "mobilevitv2": ("mobilevitv2", "AutoModelForImageClassification",
                    dict(_IMAGE, patch_size=2, width_multiplier=0.25, aspp_out_channels=16),
                    "image64", "logits"),
    "levit": ("levit", "LevitForImageClassification",
              dict(_IMAGE, image_size=64, hidden_sizes=[16, 32, 48], num_attention_heads=[1, 2, 3],
                   depths=[1, 1, 1], key_dim=[8, 8, 8], mlp_ratio=[2, 2, 2],
                   attention_ratio=[2, 2, 2]),
              "image64", "logits"),
    "poolformer": ("poolformer", "AutoModelForImageClassification", dict(_IMAGE, **_STAGES4),
                   "image", "logits"),
    "segformer": ("segformer", "AutoModelForImageClassification", _SEGFORMER, "image", "logits"),
    "cvt": ("cvt", "AutoModelForImageClassification",
            dict(_IMAGE, embed_dim=[8, 16, 24], num_heads=[1, 2, 3], depth=[1, 2, 3],
                 drop_path_rate=[0.0, 0.0, 0.0]),
            "image", "logits"),
    "focalnet": ("focalnet", "AutoModelForImageClassification",
                 dict(_IMAGE, embed_dim=8, hidden_sizes=[16, 32], depths=[1, 1], patch_size=4),
                 "image", "logits"),
    "pvt": ("pvt", "AutoModelForImageClassification",
            dict(_IMAGE, **_STAGES4, num_attention_heads=[1, 1, 2, 2]), "image", "logits"),
    "pvt_v2": ("pvt_v2", "AutoModelForImageClassification",
               dict(_IMAGE, **_STAGES4, num_attention_heads=[1, 1, 2, 2]), "image", "logits"),
    "data2vec-vision": ("data2vec-vision", "AutoModelForImageClassification", _VIT, "image",
                        "logits"),
    "vit_msn": ("vit_msn", "AutoModelForImageClassification", _VIT, "image", "logits"),
    "ijepa": ("ijepa", "AutoModelForImageClassification", _VIT, "image", "logits"),
    "dinov2_with_registers": ("dinov2_with_registers", "AutoModelForImageClassification", _VIT,
                              "image", "logits"),
    "swiftformer": ("swiftformer", "AutoModelForImageClassification",
                    dict(_IMAGE, depths=[1, 1, 1, 1], embed_dims=[8, 16, 16, 32]),
                    "image", "logits"),
    "hiera": ("hiera", "AutoModelForImageClassification",
              dict(_IMAGE, image_size=[64, 64], patch_size=[7, 7], patch_stride=[4, 4],
                   patch_padding=[3, 3], embed_dim=8, depths=[1, 1, 1, 1], num_heads=[1, 1, 1, 1],
                   masked_unit_size=[8, 8], query_stride=[2, 2]),
              "image64", "logits"),
    "segformer-seg": ("segformer", "AutoModelForSemanticSegmentation", _SEGFORMER, "segment",
                      "logits"),
    "mobilevit-seg": ("mobilevit", "AutoModelForSemanticSegmentation",
                      dict(_IMAGE, patch_size=2, hidden_sizes=[16, 24, 32],
                           neck_hidden_sizes=[8, 8, 16, 16, 24, 32, 40], aspp_out_channels=16),
                      "segment", "logits"),
    "upernet": ("upernet", "AutoModelForSemanticSegmentation",
                dict(num_labels=3, hidden_size=16, auxiliary_channels=8, auxiliary_in_channels=16,
                     backbone_config=None), "segment", "logits"),
    "dpt": ("dpt", "AutoModelForSemanticSegmentation",
            dict(_VIT, num_hidden_layers=4, backbone_out_indices=[0, 1, 2, 3],
                 neck_hidden_sizes=[8, 16, 16, 32], fusion_hidden_size=16, auxiliary_channels=8),
            "segment", "logits"),
    "yolos": ("yolos", "AutoModelForObjectDetection",
              dict(_VIT, image_size=[32, 32], num_detection_tokens=5), "detect", "logits"),
    "detr": ("detr", "AutoModelForObjectDetection", _DETR, "detect", "logits"),
    "conditional_detr": ("conditional_detr", "AutoModelForObjectDetection", _DETR, "detect",
                         "logits"),
    "table-transformer": ("table-transformer", "AutoModelForObjectDetection", _DETR, "detect",
                          "logits"),
    "deformable_detr": ("deformable_detr", "AutoModelForObjectDetection",
                        dict(_DETR, num_feature_levels=3, encoder_n_points=2, decoder_n_points=2,
                             encoder_ffn_dim=37), "detect", "logits"),
    "glpn": ("glpn", "GLPNForDepthEstimation",
             dict(_IMAGE, **_STAGES4, num_attention_heads=[1, 1, 2, 2], decoder_hidden_size=16),
             "depth", "predicted_depth"),
    "vivit": ("vivit", "AutoModelForVideoClassification",
              dict(_VIT, num_frames=4, tubelet_size=[2, 8, 8]), "video", "logits"),
    "videomae": ("videomae", "AutoModelForVideoClassification",
                 dict(_VIT, num_frames=4, tubelet_size=2), "video", "logits"),
    "timesformer": ("timesformer", "AutoModelForVideoClassification", dict(_VIT, num_frames=4),
                    "video", "logits"),
    "audio-spectrogram-transformer": ("audio-spectrogram-transformer",
                                      "AutoModelForAudioClassification",
                                      dict(_VIT, max_length=32, num_mel_bins=16, patch_size=8,
                                           frequency_stride=4, time_stride=4),
                                      "spectrogram", "logits"),
    "wav2vec2": ("wav2vec2", "AutoModelForCTC", _AUDIO, "ctc", "logits"),
    "wav2vec2-conformer": ("wav2vec2-conformer", "AutoModelForCTC",
                           dict(_AUDIO, conv_depthwise_kernel_size=3), "ctc", "logits"),
    "wav2vec2-cls": ("wav2vec2", "AutoModelForAudioClassification", _AUDIO, "audio", "logits"),
    "hubert": ("hubert", "AutoModelForCTC", _AUDIO, "ctc", "logits"),
    "wavlm": ("wavlm", "AutoModelForCTC", dict(_AUDIO, num_buckets=16, max_bucket_distance=32),
              "ctc", "logits"),
    "data2vec-audio": ("data2vec-audio", "AutoModelForCTC", dict(_AUDIO, conv_pos_kernel_size=5),
                       "ctc", "logits"),
    "sew": ("sew", "AutoModelForCTC", dict(_AUDIO, squeeze_factor=2), "ctc", "logits"),
    "sew-d": ("sew-d", "AutoModelForCTC",
              dict(_AUDIO, squeeze_factor=2, max_position_embeddings=64, position_buckets=16),
              "ctc", "logits"),
    "unispeech": ("unispeech", "AutoModelForCTC", _AUDIO, "ctc", "logits"),
    "unispeech-sat": ("unispeech-sat", "AutoModelForAudioClassification", _AUDIO, "audio",
                      "logits"),
    "whisper": ("whisper", "AutoModelForSpeechSeq2Seq",
                dict(_SMALL, num_mel_bins=8, max_source_positions=16, max_target_positions=32,
                     suppress_tokens=None, begin_suppress_tokens=None), "whisper", "logits"),
    "speech_to_text": ("speech_to_text", "AutoModelForSpeechSeq2Seq",
                       dict(_SMALL, input_feat_per_channel=8, conv_channels=16,
                            max_source_positions=64, max_target_positions=32), "speech", "logits"),
    "clip": ("clip", "AutoModel", dict(text_config=_TEXT_TOWER, vision_config=_VISION_TOWER,
                                        projection_dim=16), "image_text", "logits_per_image"),
    "siglip": ("siglip", "AutoModel", dict(text_config=_TEXT_TOWER, vision_config=_VISION_TOWER),
               "image_text", "logits_per_image"),
    "owlvit": ("owlvit", "AutoModel", dict(text_config=_TEXT_TOWER, vision_config=_VISION_TOWER,
                                            projection_dim=16), "image_text", "logits_per_image"),
    "groupvit": ("groupvit", "AutoModel",
                 dict(text_config=_TEXT_TOWER,
                      vision_config=dict(hidden_size=32, num_hidden_layers=2, depths=[1, 1],
                                         num_group_tokens=[8, 0], num_output_groups=[8, 8],
                                         num_attention_heads=4, intermediate_size=37,
                                         image_size=32, patch_size=8),
                      projection_dim=16, projection_intermediate_dim=32),
                 "image_text", "logits_per_image"),
    "blip": ("blip", "AutoModel", dict(text_config=_TEXT_TOWER, vision_config=_VISION_TOWER,
                                        projection_dim=16, image_text_hidden_size=16),
             "image_text", "logits_per_image"),
    "patchtst": ("patchtst", "PatchTSTForPrediction",
                 dict(num_input_channels=2, context_length=32, patch_length=8, patch_stride=8,
                      prediction_length=8, d_model=16, num_hidden_layers=2, num_attention_heads=4,
                      ffn_dim=37), "patchtst", "prediction_outputs"),
    "patchtsmixer": ("patchtsmixer", "PatchTSMixerForPrediction",
                     dict(num_input_channels=2, context_length=32, patch_length=8, patch_stride=8,
                          prediction_length=8, d_model=16, num_layers=2),
                     "patchtst", "prediction_outputs"),
    "time_series_transformer": ("time_series_transformer", "TimeSeriesTransformerForPrediction",
                                _SERIES, "series", "encoder_last_hidden_state"),
    "informer": ("informer", "InformerForPrediction", dict(_SERIES, attention_type="full"),
                 "series", "encoder_last_hidden_state"),
    "autoformer": ("autoformer", "AutoformerForPrediction", dict(_SERIES, label_length=4), "series",
                   "encoder_last_hidden_state"),
}

# Those of _SPECS this file checks in eager modes (the rest pass too, but take over a minute a
# mode here), and a varied sample of them under torch.compile (segformer-seg, yolos and detr
# pass too, in 90-110 s).
_SLOW = {"glpn", "deformable_detr", "conditional_detr", "upernet"}
_MEDIA = [name for name in _SPECS if name not in _SLOW]
_COMPILED = ["swin", "resnet", "efficientnet", "wav2vec2", "whisper", "clip", "patchtst"]


def _config(name: str):
    model_type, _, kwargs, _, _ = _SPECS[name]
    kwargs = dict(kwargs)
    if model_type == "upernet":
        kwargs["backbone_config"] = _backbone(
            "convnext", hidden_sizes=[8, 8, 16, 16], depths=[1, 1, 1, 1],
            out_features=["stage1", "stage2", "stage3", "stage4"])
    if "backbone_config" in kwargs and model_type != "upernet":
        levels = ["stage1", "stage2"] if model_type == "deformable_detr" else ["stage2"]
        kwargs["backbone_config"] = _backbone(
            "resnet", embedding_size=8, hidden_sizes=[8, 16], depths=[1, 1], out_features=levels)
    config = transformers.AutoConfig.for_model(model_type, **kwargs)
    # Composite configurations read these from the top level or from each tower.
    for sub in ("text_config", "vision_config"):
        if hasattr(config, sub):
            getattr(config, sub)._attn_implementation = "eager"
    config._attn_implementation = "eager"
    return config


def _model(name: str) -> torch.nn.Module:
    cls = getattr(transformers, _SPECS[name][1])
    torch.manual_seed(0)
    model = cls.from_config(_config(name)) if hasattr(cls, "from_config") else cls(_config(name))
    # A zero head, or eval-mode batch norms scaling by transformers' ~0.02 weights layer after
    # layer, would leave the logits and most gradients ~0, so the comparison would see nothing.
    with torch.no_grad():
        for parameter in model.parameters():
            if parameter.dim() > 1 and not parameter.any():
                parameter.normal_(0.0, 0.1)
        for module in model.modules():
            if isinstance(module, torch.nn.modules.batchnorm._NormBase) and module.affine:
                module.weight.normal_(1.0, 0.1)
    return model.eval()


def _inputs(name: str, config) -> dict:
    gen = torch.Generator().manual_seed(1)
    kind = _SPECS[name][3]

    def randn(*shape):
        return torch.randn(*shape, generator=gen)

    def ints(high, *shape, low=1):
        return torch.randint(low, high, shape, generator=gen)

    if kind in ("image", "image64"):
        side = 64 if kind == "image64" else 32
        return {"pixel_values": randn(2, 3, side, side), "labels": torch.tensor([0, 2])}
    if kind == "segment":
        return {"pixel_values": randn(2, 3, 32, 32), "labels": ints(3, 2, 32, 32, low=0)}
    if kind == "detect":
        return {"pixel_values": randn(2, 3, 32, 32),
                "labels": [{"class_labels": ints(3, n, low=0),
                            "boxes": torch.rand(n, 4, generator=gen) * 0.5 + 0.25}
                           for n in (2, 1)]}
    if kind == "depth":
        return {"pixel_values": randn(2, 3, 32, 32), "labels": torch.rand(2, 32, 32, generator=gen)}
    if kind == "video":
        return {"pixel_values": randn(2, 4, 3, 32, 32), "labels": torch.tensor([0, 2])}
    if kind == "spectrogram":
        return {"input_values": randn(2, 32, 16), "labels": torch.tensor([0, 2])}
    if kind == "ctc":
        return {"input_values": randn(2, 1024), "labels": ints(32, 2, 5)}
    if kind == "audio":
        return {"input_values": randn(2, 1024), "labels": torch.tensor([0, 2])}
    if kind == "whisper":
        return {"input_features": randn(2, 8, 32), "decoder_input_ids": ints(99, 2, 7),
                "labels": ints(99, 2, 7)}
    if kind == "speech":
        return {"input_features": randn(2, 40, 8), "labels": ints(99, 2, 7)}
    if kind == "image_text":
        return {"input_ids": ints(99, 2, 7), "pixel_values": randn(2, 3, 32, 32),
                "return_loss": True}
    if kind == "patchtst":
        return {"past_values": randn(2, 32, 2), "future_values": randn(2, 8, 2)}
    if kind == "series":
        past = config.context_length + max(config.lags_sequence)
        return {"past_values": randn(2, past), "past_time_features": randn(2, past, 1),
                "past_observed_mask": torch.ones(2, past),
                "future_values": randn(2, config.prediction_length),
                "future_time_features": randn(2, config.prediction_length, 1)}
    raise ValueError(kind)


@dataclasses.dataclass
class _Output(transformers.utils.ModelOutput):
    # A dataclass: dynamo rebuilds a bare ModelOutput(loss=...) without its attributes.
    loss: torch.Tensor | None = None
    logits: torch.Tensor | None = None


class _Renamed(torch.nn.Module):
    """Shows a model's loss and its chosen output as `loss` and `logits`, which _run reads."""

    def __init__(self, model: torch.nn.Module, output: str):
        super().__init__()
        self.model = model
        self.output = output

    def forward(self, **inputs):
        out = self.model(**inputs)
        return _Output(loss=out.loss, logits=out[self.output])


def _wrapped(name: str) -> torch.nn.Module:
    model = _model(name)
    output = _SPECS[name][4]
    return model if output == "logits" else _Renamed(model, output)


def _calibrate_batch_norms(model: torch.nn.Module, inputs: dict):
    """Sets eval-mode batch norms' running statistics to those of `inputs`, or for images of a
    larger batch like them: with transformers' initial ones (0, 1) the activations shrink layer
    after layer to ~1e-30, and statistics of two 1x1 maps scale the next input up 100x."""
    norms = [m for m in model.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
    if not norms:
        return
    for norm in norms:
        norm.reset_running_stats()
        norm.momentum = None
        norm.train()
    if "pixel_values" in inputs:
        gen = torch.Generator().manual_seed(2)
        shape = inputs["pixel_values"].shape[1:]
        inputs = {key: value.repeat(16, *[1] * (value.dim() - 1)) for key, value in inputs.items()
                  if key not in ("pixel_values", "labels") and isinstance(value, torch.Tensor)}
        inputs["pixel_values"] = torch.randn(32, *shape, generator=gen)
    with torch.no_grad():
        model(**inputs)
    # train() empties what a model caches in eval (levit's attention biases), as the forward
    # under no_grad left it values that take no gradient.
    model.train()
    model.eval()


def _run_case(name: str, mode: str, channels_last: bool = False):
    """CPU's and tpu's (loss, logits, gradients) for one architecture and mode."""
    model = _wrapped(name)
    inputs = _inputs(name, _config(name))
    _calibrate_batch_norms(model, inputs)
    if channels_last:
        model.to(memory_format=torch.channels_last)
        inputs["pixel_values"] = inputs["pixel_values"].contiguous(
            memory_format=torch.channels_last)
    twin = copy.deepcopy(model)
    expected = _run(model, inputs, "cpu")
    return _run_on_tpu(twin, inputs, mode), expected


def _noise(expected) -> float:
    """Rounding left in a gradient that is zero in exact arithmetic (a key's bias under softmax,
    a bias before a group norm: float64 gives ~1e-16) scales with the largest gradient."""
    return 1e-6 * max(grad.abs().max().item() for grad in expected[2].values()) + 1e-7


@pytest.mark.parametrize("name,mode", [(name, mode) for mode in ("strict", "fused")
                                       for name in _MEDIA] + [(n, "compile") for n in _COMPILED])
def test_media_architecture_forward_backward_matches_cpu(name, mode):
    got, expected = _run_case(name, mode)
    _assert_matches(got, expected, noise=_noise(expected))


@pytest.mark.parametrize("name", ["resnet", "efficientnet", "mobilevit"])
def test_channels_last_conv_net_matches_cpu(name):
    got, expected = _run_case(name, "strict", channels_last=True)
    _assert_matches(got, expected, noise=_noise(expected))
