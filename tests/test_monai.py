"""MONAI (medical imaging) on tpu: its networks train, its losses, metrics, transforms and
sliding-window inference give CPU's values, dtypes and shapes, and its MetaTensor (a tensor
subclass copying metadata between tensors on every op) keeps each result's own values. The
default suite runs a few; ``-m slow`` sweeps the networks (2-D and 3-D), losses, metrics
and transforms, and a training step in fused eager and under torch.compile."""

from __future__ import annotations

import copy

import pytest
import torch
from conftest import TPU, assert_same, compare_with_gradients

import torchtpu

monai = pytest.importorskip("monai")
import monai.losses as L  # noqa: E402
import monai.metrics as M  # noqa: E402
import monai.networks.nets as N  # noqa: E402
import monai.transforms as T  # noqa: E402
from monai.data import MetaTensor  # noqa: E402
from monai.inferers import sliding_window_inference  # noqa: E402
from monai.networks.utils import one_hot  # noqa: E402

_g = torch.Generator().manual_seed(0)
X2 = torch.randn(2, 1, 32, 32, generator=_g)
X3 = torch.randn(1, 1, 32, 32, 32, generator=_g)
X64 = torch.randn(2, 1, 64, 64, generator=_g)
X3_64 = torch.randn(1, 1, 64, 32, 32, generator=_g)
LOGITS2 = torch.randn(2, 3, 16, 16, generator=_g)
LABELS2 = torch.randint(0, 3, (2, 1, 16, 16), generator=_g)
LOGITS3 = torch.randn(2, 3, 8, 8, 8, generator=_g)
LABELS3 = torch.randint(0, 3, (2, 1, 8, 8, 8), generator=_g)
IMG = torch.rand(2, 1, 16, 16, generator=_g)
IMG_B = torch.rand(2, 1, 16, 16, generator=_g)
IMG3 = torch.rand(2, 1, 12, 12, 12, generator=_g)
IMG3_B = torch.rand(2, 1, 12, 12, 12, generator=_g)
VOLUME = torch.rand(1, 20, 24, 16, generator=_g)
AFFINE = torch.diag(torch.tensor([1.5, 1.0, 2.0, 1.0]))


def train_step(make, x, *, steps=1, loss_fn=None, rtol=1e-4, atol=1e-4):
    """``steps`` SGD steps of ``make()`` on CPU and on tpu: outputs, loss, gradients and
    parameters. (SGD: Adam would turn the zero gradient of a conv bias before a norm,
    rounding noise on both devices, into a full step of either sign.)"""
    torch.manual_seed(0)
    cpu = make()
    tpu = copy.deepcopy(cpu).to(TPU)
    loss_fn = loss_fn or (lambda out: sum(o.float().square().mean() for o in
                                          (out if isinstance(out, (list, tuple)) else [out])))
    opts = [torch.optim.SGD(m.parameters(), lr=0.1) for m in (cpu, tpu)]
    for _ in range(steps):
        results = []
        for model, opt, inp in ((cpu, opts[0], x), (tpu, opts[1], x.to(TPU))):
            opt.zero_grad()
            out = model(inp)
            loss = loss_fn(out)
            loss.backward()
            opt.step()
            results.append((out, loss, [p.grad for p in model.parameters()]))
        (out_c, loss_c, grads_c), (out_t, loss_t, grads_t) = results
        assert_same(out_t, out_c, rtol=rtol, atol=atol)
        assert_same(loss_t, loss_c, rtol=rtol, atol=atol)
        for a, e in zip(grads_t, grads_c, strict=True):
            assert (a is None) == (e is None)
            if e is not None:
                assert_same(a, e, rtol=10 * rtol, atol=10 * atol)
    assert_same(list(tpu.parameters()), list(cpu.parameters()), rtol=10 * rtol, atol=10 * atol)


# --- default: MetaTensor, a loss, a network step --------------------------------------------


def test_metatensor_ops_and_a_transform_keep_their_values_and_metadata():
    # Each op on a tpu MetaTensor gave its input's values (MetaTensor copies __dict__).
    def run(device):
        m = MetaTensor(VOLUME.clone(), affine=AFFINE.clone()).to(device)
        y = (m * 2 + 1)[None]
        flipped = T.Flip(spatial_axis=1)(m)
        return y, flipped, flipped.affine, y.affine

    tpu, cpu = run(TPU), run("cpu")
    assert all(isinstance(t, MetaTensor) and t.device.type == "tpu" for t in tpu[:2])
    assert_same([t.as_tensor() for t in tpu[:2]], [t.as_tensor() for t in cpu[:2]])
    assert_same(tpu[2:], cpu[2:])


def test_dice_ce_loss_and_its_gradient():
    loss = L.DiceCELoss(to_onehot_y=True, softmax=True)
    compare_with_gradients(lambda x, y: loss(x, y), LOGITS2, LABELS2)


# --- slow sweeps ------------------------------------------------------------------------------


NETWORKS = {
    "unet2d": (lambda: N.UNet(2, 1, 2, channels=(4, 8, 16), strides=(2, 2), num_res_units=2),
               X2),
    "unet3d": (lambda: N.UNet(3, 1, 2, channels=(4, 8, 16), strides=(2, 2), num_res_units=1),
               X3),
    "basicunet2d": (lambda: N.BasicUNet(2, 1, 2, features=(4, 4, 8, 8, 16, 4)), X2),
    "basicunet3d": (lambda: N.BasicUNet(3, 1, 2, features=(4, 4, 8, 8, 16, 4)), X3),
    "attentionunet2d": (lambda: N.AttentionUnet(2, 1, 2, channels=(4, 8, 16), strides=(2, 2)),
                        X2),
    "segresnet2d": (lambda: N.SegResNet(2, init_filters=8, in_channels=1, out_channels=2,
                                        blocks_down=(1, 2), blocks_up=(1,)), X2),
    "segresnet3d": (lambda: N.SegResNet(3, init_filters=8, in_channels=1, out_channels=2,
                                        blocks_down=(1, 2), blocks_up=(1,)), X3),
    "dynunet2d": (lambda: N.DynUNet(2, 1, 2, kernel_size=[3, 3, 3], strides=[1, 2, 2],
                                    upsample_kernel_size=[2, 2]), X2),
    "dynunet3d_deep_supervision": (
        lambda: N.DynUNet(3, 1, 2, kernel_size=[3, 3, 3], strides=[1, 2, 2],
                          upsample_kernel_size=[2, 2], deep_supervision=True, deep_supr_num=1,
                          res_block=True), X3),
    "unetr2d": (lambda: N.UNETR(1, 2, img_size=(32, 32), feature_size=4, hidden_size=24,
                                mlp_dim=32, num_heads=2, spatial_dims=2), X2),
    "unetr3d": (lambda: N.UNETR(1, 2, img_size=(32, 32, 32), feature_size=4, hidden_size=24,
                                mlp_dim=32, num_heads=2, spatial_dims=3), X3),
    # (a 32-wide input reaches Swin's bottleneck at 1x1, whose instance norm refuses it)
    "swinunetr2d": (lambda: N.SwinUNETR(in_channels=1, out_channels=2, feature_size=12,
                                        depths=(1, 1, 1, 1), num_heads=(1, 1, 1, 1),
                                        spatial_dims=2), X64),
    "swinunetr3d": (lambda: N.SwinUNETR(in_channels=1, out_channels=2, feature_size=12,
                                        depths=(1, 1, 1, 1), num_heads=(1, 1, 1, 1),
                                        spatial_dims=3), X3_64),
    # (eval: in training, batch norm of a 1x1 map of a batch of 2 amplifies rounding a million
    # times, on CPU as well)
    "densenet121": (lambda: N.DenseNet121(spatial_dims=2, in_channels=1, out_channels=3).eval(),
                    X2),
    "densenet3d": (lambda: N.DenseNet(spatial_dims=3, in_channels=1, out_channels=3,
                                      init_features=4, growth_rate=4, block_config=(1, 2)), X3),
    "resnet18_2d": (lambda: N.resnet18(spatial_dims=2, n_input_channels=1, num_classes=3), X2),
    "resnet10_3d": (lambda: N.resnet10(spatial_dims=3, n_input_channels=1, num_classes=3), X3),
    "autoencoder": (lambda: N.AutoEncoder(2, 1, 1, channels=(4, 8), strides=(2, 2),
                                          num_res_units=1), X2),
}


@pytest.mark.slow
def test_unet_trains_with_dice_ce_loss():
    loss = L.DiceCELoss(to_onehot_y=True, softmax=True)
    labels = torch.randint(0, 2, (2, 1, 16, 16), generator=torch.Generator().manual_seed(1))
    train_step(lambda: N.UNet(2, 1, 2, channels=(4, 8), strides=(2,), num_res_units=1),
               X2[..., :16, :16], loss_fn=lambda out: loss(out, labels.to(out.device)))


@pytest.mark.slow
@pytest.mark.parametrize("name", NETWORKS)
def test_network_trains_as_on_cpu(name):
    make, x = NETWORKS[name]
    train_step(make, x)


@pytest.mark.slow
def test_variational_autoencoder_trains_as_on_cpu():
    # Its reparameterisation draws noise on each device: the same draw, made on CPU.
    noise = torch.randn(2, 8, generator=torch.Generator().manual_seed(3))

    def make():
        vae = N.VarAutoEncoder(2, (1, 32, 32), 1, 8, channels=(4, 8), strides=(2, 2))
        vae.reparameterize = lambda mu, logvar: mu + noise.to(mu.device) * (0.5 * logvar).exp()
        return vae

    train_step(make, X2, loss_fn=lambda out: sum(o.square().mean() for o in out))


LOSSES = {
    "dice": (lambda x, y: L.DiceLoss(to_onehot_y=True, softmax=True)(x, y), LOGITS2, LABELS2),
    "dice_sigmoid_batch": (lambda x, y: L.DiceLoss(sigmoid=True, batch=True)(
        x, (y > 0).float().expand_as(x)), LOGITS2, LABELS2),
    "dice_jaccard_3d": (lambda x, y: L.DiceLoss(
        to_onehot_y=True, softmax=True, reduction="none", squared_pred=True, jaccard=True)(x, y),
        LOGITS3, LABELS3),
    "dice_ce": (lambda x, y: L.DiceCELoss(to_onehot_y=True, softmax=True)(x, y),
                LOGITS2, LABELS2),
    "dice_ce_3d": (lambda x, y: L.DiceCELoss(to_onehot_y=True, softmax=True, lambda_ce=0.7)(
        x, y), LOGITS3, LABELS3),
    "dice_focal": (lambda x, y: L.DiceFocalLoss(to_onehot_y=True, softmax=True)(x, y),
                   LOGITS2, LABELS2),
    "focal": (lambda x, y: L.FocalLoss(to_onehot_y=True, gamma=2.0)(x, y), LOGITS2, LABELS2),
    "focal_softmax": (lambda x, y: L.FocalLoss(to_onehot_y=True, use_softmax=True, gamma=2.0,
                                               alpha=0.25)(x, y), LOGITS2, LABELS2),
    "focal_weighted_3d": (lambda x, y: L.FocalLoss(to_onehot_y=True, weight=[1.0, 2.0, 0.5])(
        x, y), LOGITS3, LABELS3),
    "tversky": (lambda x, y: L.TverskyLoss(to_onehot_y=True, softmax=True, alpha=0.3,
                                           beta=0.7)(x, y), LOGITS2, LABELS2),
    "generalized_dice": (lambda x, y: L.GeneralizedDiceLoss(to_onehot_y=True, softmax=True)(
        x, y), LOGITS2, LABELS2),
    "generalized_dice_3d": (lambda x, y: L.GeneralizedDiceLoss(
        to_onehot_y=True, softmax=True, w_type="simple")(x, y), LOGITS3, LABELS3),
    "generalized_wasserstein_dice": (lambda x, y: L.GeneralizedWassersteinDiceLoss(
        dist_matrix=torch.tensor([[0.0, 1, 1], [1, 0, 0.5], [1, 0.5, 0]], device=x.device))(
        x, y[:, 0]), LOGITS2, LABELS2),
    "ssim_2d": (lambda x, y: L.SSIMLoss(spatial_dims=2, data_range=1.0, win_size=7)(x, y),
                IMG, IMG_B),
    "ssim_gaussian": (lambda x, y: L.SSIMLoss(spatial_dims=2, data_range=1.0,
                                              kernel_type="gaussian", win_size=7)(x, y),
                      IMG, IMG_B),
    "ssim_3d": (lambda x, y: L.SSIMLoss(spatial_dims=3, data_range=1.0, win_size=5)(x, y),
                IMG3, IMG3_B),
    "masked_dice": (lambda x, y: L.MaskedDiceLoss(to_onehot_y=True, softmax=True)(
        x, y, mask=(y > 0).float()), LOGITS2, LABELS2),
    "local_ncc": (lambda a, b: L.LocalNormalizedCrossCorrelationLoss(
        spatial_dims=2, kernel_size=3)(a, b), IMG, IMG_B),
    "mutual_information": (lambda a, b: L.GlobalMutualInformationLoss()(a, b), IMG, IMG_B),
    "bending_energy": (lambda a: L.BendingEnergyLoss()(a.expand(2, 2, 16, 16)), IMG),
    "hausdorff_dt": (lambda x, y: L.HausdorffDTLoss(to_onehot_y=True, softmax=True)(x, y),
                     LOGITS2, LABELS2),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", LOSSES)
def test_loss_and_its_gradient(name):
    compare_with_gradients(*LOSSES[name])


def _blobs():
    label = torch.zeros(2, 1, 16, 16, dtype=torch.long)
    label[..., 3:9, 4:12] = 1
    label[..., 10:14, 2:6] = 2
    pred = label.roll(1, -1)
    pred[0, 0, 0, 0] = 2
    return pred, label


BLOB_PRED, BLOB_LABEL = _blobs()


def _accumulated(cls, **kwargs):
    def run(pred, label):
        metric = cls(**kwargs)
        metric(one_hot(pred, 3, dim=1), one_hot(label, 3, dim=1))
        metric(one_hot(label, 3, dim=1), one_hot(label, 3, dim=1))
        return metric.aggregate()
    return run


def _onehots(fn):
    return lambda pred, label: fn(one_hot(pred, 3, dim=1), one_hot(label, 3, dim=1))


METRICS = {
    "dice": (_accumulated(M.DiceMetric, include_background=False, reduction="mean"),
             LABELS2.roll(1, -1), LABELS2),
    "dice_3d_per_class": (_onehots(lambda p, y: M.DiceMetric(
        include_background=True, reduction="none", ignore_empty=False)(p, y)),
        LABELS3.roll(1, -1), LABELS3),
    "dice_helper": (lambda p, y: M.DiceHelper(include_background=True, softmax=False,
                                              reduction="mean_batch")(
        one_hot(p, 3, dim=1).float(), y), LABELS2.roll(1, -1), LABELS2),
    "mean_iou": (_accumulated(M.MeanIoU, include_background=True, reduction="mean_batch"),
                 LABELS2.roll(1, -1), LABELS2),
    "confusion_matrix": (_onehots(M.get_confusion_matrix), LABELS2.roll(1, -1), LABELS2),
    "confusion_matrix_metric": (_accumulated(
        M.ConfusionMatrixMetric, include_background=False,
        metric_name=["sensitivity", "precision", "f1 score", "accuracy", "mcc"]),
        LABELS2.roll(1, -1), LABELS2),
    "hausdorff_95": (_onehots(lambda p, y: M.compute_hausdorff_distance(
        p, y, include_background=False, percentile=95)), BLOB_PRED, BLOB_LABEL),
    "hausdorff_directed": (_accumulated(M.HausdorffDistanceMetric, include_background=False,
                                        directed=True), BLOB_PRED, BLOB_LABEL),
    "surface_distance": (_onehots(lambda p, y: M.compute_average_surface_distance(
        p, y, include_background=False, symmetric=True)), BLOB_PRED, BLOB_LABEL),
    "surface_dice": (_onehots(lambda p, y: M.compute_surface_dice(
        p, y, class_thresholds=[1.0, 1.0])), BLOB_PRED, BLOB_LABEL),
    "generalized_dice": (_onehots(M.compute_generalized_dice), LABELS2.roll(1, -1), LABELS2),
    "fbeta": (_onehots(lambda p, y: M.FBetaScore(beta=2.0)(p, y)), LABELS2.roll(1, -1),
              LABELS2),
    "ssim": (lambda a, b: M.SSIMMetric(spatial_dims=2, data_range=1.0)(a, b), IMG, IMG_B),
    "psnr": (lambda a, b: M.PSNRMetric(max_val=1.0)(a, b), IMG, IMG_B),
    "roc_auc": (lambda a, b: M.compute_roc_auc(a.flatten()[:50],
                                               (b.flatten()[:50] > 0.5).long()), IMG, IMG_B),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", METRICS)
def test_metric(name):
    fn, *inputs = METRICS[name]
    compare_with_gradients(fn, *inputs, grad=False)


TRANSFORMS = {
    "orientation_free_spacing": T.Spacing(pixdim=(1.0, 1.2, 1.0), mode="bilinear"),
    "scale_intensity_range": T.ScaleIntensityRange(a_min=0.1, a_max=0.9, b_min=0.0, b_max=1.0,
                                                   clip=True),
    "normalize_intensity": T.NormalizeIntensity(),
    "resize": T.Resize((10, 12, 8)),
    "resize_trilinear": T.Resize((10, 12, 8), mode="trilinear"),
    "affine": T.Affine(rotate_params=(0.3, 0.0, 0.0), scale_params=(1.1, 0.9, 1.0),
                       padding_mode="zeros", image_only=True),
    "rand_affine": lambda m: T.RandAffine(prob=1.0, rotate_range=(0.3, 0.3, 0.3),
                                          scale_range=0.1,
                                          padding_mode="border").set_random_state(0)(m),
    "rand_elastic": lambda m: T.Rand3DElastic(sigma_range=(5, 7), magnitude_range=(50, 100),
                                              prob=1.0,
                                              padding_mode="zeros").set_random_state(0)(m),
    "crop_foreground": T.CropForeground(select_fn=lambda t: t > 0.5),
    "spatial_pad": T.SpatialPad((24, 24, 24)),
    "flip": T.Flip(spatial_axis=1),
    "rotate90": T.Rotate90(k=1, spatial_axes=(0, 1)),
    "zoom": T.Zoom(zoom=1.3, keep_size=True),
    "gaussian_smooth": T.GaussianSmooth(sigma=1.0),
    "histogram_normalize": T.HistogramNormalize(num_bins=16),
    "threshold": T.AsDiscrete(threshold=0.5),
    "one_hot": lambda m: T.AsDiscrete(to_onehot=3)((m * 2.99).floor()),
    "crop_by_pos_neg_label": lambda m: T.RandCropByPosNegLabel(
        (8, 8, 8), label=(m > 0.5).float(), num_samples=2, pos=1, neg=1
    ).set_random_state(0)(m)[1],
}


@pytest.mark.slow
@pytest.mark.parametrize("name", TRANSFORMS)
def test_transform_of_a_metatensor(name):
    def run(device):
        out = TRANSFORMS[name](MetaTensor(VOLUME.clone(), affine=AFFINE.clone()).to(device))
        return out.as_tensor(), out.affine, isinstance(out, MetaTensor)

    tpu, cpu = run(TPU), run("cpu")
    assert tpu[2] and cpu[2] and tpu[0].device.type == "tpu"
    assert_same(tpu[:2], cpu[:2], rtol=1e-4, atol=1e-4)


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["constant", "gaussian"])
@pytest.mark.parametrize("where", ["tpu", "window_on_tpu_result_on_cpu"])
def test_sliding_window_inference(mode, where):
    torch.manual_seed(0)
    net = N.UNet(2, 1, 2, channels=(4, 8), strides=(2,), num_res_units=0).eval()
    net_tpu = copy.deepcopy(net).to(TPU)
    x = torch.randn(1, 1, 40, 36, generator=torch.Generator().manual_seed(2))
    kwargs = {"overlap": 0.25 if mode == "constant" else 0.5, "mode": mode}
    with torch.no_grad():
        expected = sliding_window_inference(x, (16, 16), 4, net, **kwargs)
        if where == "tpu":
            actual = sliding_window_inference(x.to(TPU), (16, 16), 4, net_tpu, **kwargs)
        else:
            actual = sliding_window_inference(x, (16, 16), 4, net_tpu, sw_device=TPU,
                                              device="cpu", **kwargs)
    assert actual.device.type == ("tpu" if where == "tpu" else "cpu")
    assert_same(actual, expected, rtol=1e-4, atol=1e-4)


def _unet_dice_steps(device, wrap):
    torch.manual_seed(0)
    net = N.UNet(2, 1, 2, channels=(4, 8, 16), strides=(2, 2), num_res_units=1).to(device)
    forward, loss_fn = wrap(net), L.DiceCELoss(to_onehot_y=True, softmax=True)
    opt = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
    labels = torch.randint(0, 2, (2, 1, 32, 32), generator=torch.Generator().manual_seed(1))
    losses = []
    for _ in range(2):
        opt.zero_grad()
        loss = loss_fn(forward(X2.to(device)), labels.to(device))
        loss.backward()
        opt.step()
        losses.append(loss.detach())
    return losses, [p.detach() for p in net.parameters()]


@pytest.mark.slow
@pytest.mark.parametrize("how", ["fused", "compiled"])
def test_unet_training_in_fused_eager_and_compiled(how):
    expected = _unet_dice_steps("cpu", lambda m: m)
    if how == "fused":
        with torchtpu.set_eager_mode("fused"):
            actual = _unet_dice_steps(TPU, lambda m: m)
    else:
        actual = _unet_dice_steps(TPU, lambda m: torch.compile(m, backend="tpu"))
    assert_same(actual, expected, rtol=1e-3, atol=1e-4)


def _pipeline(device):
    """A MONAI training loop as users write it: dict transforms on MetaTensors, a
    DataLoader collating them into a batch (MetaTensor replaces a batch's attributes
    wholesale on each op), the batch moved to the device, post-processing of the
    decollated predictions."""
    from monai.data import DataLoader, Dataset, decollate_batch

    g = torch.Generator().manual_seed(4)
    data = [{"image": MetaTensor(torch.rand(1, 20, 20, generator=g), affine=AFFINE.clone()),
             "label": MetaTensor((torch.rand(1, 20, 20, generator=g) > 0.5).float())}
            for _ in range(4)]
    keys = ["image", "label"]
    transforms = T.Compose([T.ScaleIntensityd(keys="image"),
                            T.RandSpatialCropd(keys=keys, roi_size=(16, 16), random_size=False),
                            T.RandFlipd(keys=keys, prob=0.5, spatial_axis=0)])
    transforms.set_random_state(0)
    post = T.Compose([T.Activations(softmax=True), T.AsDiscrete(argmax=True)])
    torch.manual_seed(0)
    net = N.UNet(2, 1, 2, channels=(4, 8), strides=(2,), num_res_units=1).to(device)
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    loss_fn = L.DiceLoss(to_onehot_y=True, softmax=True)
    out = []
    for batch in DataLoader(Dataset(data, transforms), batch_size=2, num_workers=0):
        opt.zero_grad()
        pred = net(batch["image"].to(device))
        loss = loss_fn(pred, batch["label"].to(device))
        loss.backward()
        opt.step()
        items = decollate_batch(pred.detach())
        out += [loss.detach().as_tensor(), items[1].as_tensor(), items[1].affine,
                post(items[0]).as_tensor()]
    return out + [p.detach() for p in net.parameters()]


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["strict", "fused"])
def test_a_training_pipeline_of_metatensors(mode):
    expected = _pipeline("cpu")
    with torchtpu.set_eager_mode(mode):
        actual = _pipeline(TPU)
    assert_same(actual, expected, rtol=1e-4, atol=1e-4)


@pytest.mark.slow
def test_compiled_network_of_a_metatensor():
    torch.manual_seed(0)
    net = N.UNet(2, 1, 2, channels=(4, 8), strides=(2,), num_res_units=1)
    compiled = torch.compile(copy.deepcopy(net).to(TPU), backend="tpu")
    x = MetaTensor(X2[..., :16, :16], affine=AFFINE)
    expected, actual = net(x), compiled(x.to(TPU))
    assert isinstance(actual, MetaTensor)
    assert_same(actual.as_tensor(), expected.as_tensor(), rtol=1e-4, atol=1e-4)
