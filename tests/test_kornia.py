"""kornia (differentiable computer vision) on tpu: filters, colour, geometry, enhance,
morphology, losses, features and augmentation give CPU's values, dtypes, shapes and
gradients. Augmentations draw their parameters once on CPU and apply them on both devices.
The default suite runs a few functions; ``-m slow`` sweeps the families, in strict, fused
and compiled modes."""

from __future__ import annotations

import pytest
import torch
from conftest import compare_with_gradients

import torchtpu

kornia = pytest.importorskip("kornia")
import kornia.augmentation as KA  # noqa: E402
import kornia.color as KC  # noqa: E402
import kornia.enhance as KE  # noqa: E402
import kornia.feature as KFe  # noqa: E402
import kornia.filters as KF  # noqa: E402
import kornia.geometry as KG  # noqa: E402
import kornia.geometry.conversions as KCv  # noqa: E402
import kornia.geometry.transform as KT  # noqa: E402
import kornia.losses as KL  # noqa: E402
import kornia.morphology as KM  # noqa: E402

# (values from the CPU generator, so both devices see the same inputs)
_g = torch.Generator().manual_seed(0)
IMG = torch.rand(2, 3, 16, 20, generator=_g)
IMG2 = torch.rand(2, 3, 16, 20, generator=_g)
GRAY = torch.rand(2, 1, 32, 32, generator=_g)
PATCHES = torch.rand(4, 1, 32, 32, generator=_g)
AFFINE = torch.tensor([[[0.9, 0.2, 1.5], [-0.1, 1.1, -2.0]],
                       [[1.2, -0.3, 0.5], [0.25, 0.8, 1.0]]])
HOMOGRAPHY = torch.tensor([[[0.9, 0.2, 1.5], [-0.1, 1.1, -2.0], [1e-3, -2e-3, 1.0]],
                           [[1.2, -0.3, 0.5], [0.25, 0.8, 1.0], [2e-3, 1e-3, 1.0]]])
BOXES = torch.tensor([[[1., 2.], [12., 2.], [12., 10.], [1., 10.]],
                      [[0., 0.], [7., 0.], [7., 7.], [0., 7.]]])
CAMERA = torch.tensor([[[100., 0., 10.], [0., 110., 8.], [0., 0., 1.]]]).repeat(2, 1, 1)
DEPTH = torch.rand(2, 1, 16, 20, generator=_g) + 1.0
POINTS = torch.randn(1, 20, 2, generator=_g)
MOVED = (POINTS @ torch.tensor([[1.1, 0.1], [-0.05, 0.95]]) + torch.tensor([0.3, -0.2])
         + 0.01 * torch.randn(1, 20, 2, generator=_g))
QUATERNIONS = torch.randn(5, 4, generator=_g)
AXIS_ANGLES = torch.randn(5, 3, generator=_g)
LOGITS = torch.randn(4, 5, 3, 3, generator=_g)
LABELS = torch.randint(0, 5, (4, 3, 3), generator=_g)


def _on(device, t):
    return t.to(device)


# ---- default suite: one function from each of the most used families ----

@pytest.mark.slow
def test_gaussian_blur_and_rgb_to_hsv_match_cpu():
    compare_with_gradients(lambda x: KC.rgb_to_hsv(KF.gaussian_blur2d(x, (5, 5), (1.5, 1.5))), IMG)


def test_augmentation_sequential_applies_cpu_drawn_params_as_cpu():
    seq = KA.AugmentationSequential(
        KA.RandomAffine(20.0, (0.1, 0.1), (0.9, 1.1), p=1.0),
        data_keys=["input", "keypoints"])
    keypoints = torch.tensor([[[3., 4.], [10., 11.]], [[7., 8.], [15., 2.]]])
    torch.manual_seed(0)
    seq(IMG, keypoints)
    params = seq._params

    def apply(x, k):
        on = [type(p)(p.name, {key: v.to(x.device) if isinstance(v, torch.Tensor) else v
                               for key, v in p.data.items()}) for p in params]
        return seq.to(x.device)(x, k, params=on)

    compare_with_gradients(apply, IMG, keypoints)


def test_warp_affine_with_a_fill_in_fused_eager_matches_cpu():
    # A target pixel lands on an integer row: XLA:CPU recomputed the sampling coordinate in
    # two fusions of the one program, and took the floor of one copy and the fraction of the
    # other (the next row's pixel, 0.6 off)
    fill = torch.tensor([0.1, 0.5, 0.9])
    with torchtpu.set_eager_mode("fused"):
        compare_with_gradients(lambda x, m: KT.warp_affine(x, m, (16, 20), padding_mode="fill",
                                            fill_value=fill), IMG, AFFINE, grad=False)


# ---- -m slow: the families' sweep ----

_FILTERS = {
    "gaussian_blur2d": lambda x: KF.gaussian_blur2d(x, (3, 7), (1.0, 2.0), "replicate"),
    "sobel": lambda x: KF.sobel(x),
    "spatial_gradient2": lambda x: KF.spatial_gradient(x, order=2),
    "laplacian": lambda x: KF.laplacian(x, 5),
    "canny": lambda x: KF.canny(x),
    "median_blur": lambda x: KF.median_blur(x, (3, 3)),
    "box_blur": lambda x: KF.box_blur(x, (3, 5), separable=True),
    "unsharp_mask": lambda x: KF.unsharp_mask(x, (3, 3), (1.5, 1.5)),
    "bilateral_blur": lambda x: KF.bilateral_blur(x, (5, 5), 0.1, (1.5, 1.5)),
    "motion_blur": lambda x: KF.motion_blur(x, 5, 35.0, 0.5),
    "max_blur_pool2d": lambda x: KF.max_blur_pool2d(x, 3),
    "guided_blur": lambda x: KF.guided_blur(x, x, 3, 0.1),
}
_COLOUR = {
    "hsv": lambda x: KC.hsv_to_rgb(KC.rgb_to_hsv(x)),
    "hls": lambda x: KC.hls_to_rgb(KC.rgb_to_hls(x)),
    "lab": lambda x: KC.lab_to_rgb(KC.rgb_to_lab(x)),
    "luv": lambda x: KC.luv_to_rgb(KC.rgb_to_luv(x)),
    "yuv": lambda x: KC.yuv_to_rgb(KC.rgb_to_yuv(x)),
    "ycbcr": lambda x: KC.ycbcr_to_rgb(KC.rgb_to_ycbcr(x)),
    "grayscale": lambda x: KC.rgb_to_grayscale(x),
    "yuv420": lambda x: KC.rgb_to_yuv420(x),
    "raw": lambda x: KC.raw_to_rgb(KC.rgb_to_raw(x, KC.CFA.BG), KC.CFA.BG),
    "linear_rgb": lambda x: KC.rgb_to_linear_rgb(x),
}
_ENHANCE = {
    "adjust_contrast": lambda x: KE.adjust_contrast(x, 0.7),
    "adjust_gamma": lambda x: KE.adjust_gamma(x, 1.5, 0.9),
    "adjust_hue": lambda x: KE.adjust_hue(x, 0.3),
    "adjust_saturation": lambda x: KE.adjust_saturation(x, 1.5),
    "adjust_log": lambda x: KE.adjust_log(x, 1.2),
    "posterize": lambda x: KE.posterize(x, 3),
    "solarize": lambda x: KE.solarize(x, 0.5),
    "sharpness": lambda x: KE.sharpness(x, 0.5),
    "equalize": lambda x: KE.equalize(x),
    "equalize_clahe": lambda x: KE.equalize_clahe(x, 40.0, (2, 2)),
    "normalize": lambda x: KE.normalize(x, _on(x.device, torch.tensor([0.5, 0.4, 0.3])),
                                        _on(x.device, torch.tensor([0.2, 0.3, 0.1]))),
    "normalize_min_max": lambda x: KE.normalize_min_max(x),
    "image_histogram2d": lambda x: KE.image_histogram2d(x, 0.0, 1.0, 16),
}
def _with_square_kernel(op):
    return lambda x: op(x, torch.ones(3, 3, device=x.device))


_MORPHOLOGY = {
    name: _with_square_kernel(op)
    for name, op in [("dilation", KM.dilation), ("erosion", KM.erosion), ("opening", KM.opening),
                     ("closing", KM.closing), ("gradient", KM.gradient),
                     ("top_hat", KM.top_hat), ("bottom_hat", KM.bottom_hat)]
}
_GEOMETRY = {
    "warp_perspective": lambda x: KT.warp_perspective(x, _on(x.device, HOMOGRAPHY), (16, 20)),
    "warp_affine_bicubic": lambda x: KT.warp_affine(x, _on(x.device, AFFINE), (16, 20),
                                                    mode="bicubic", padding_mode="reflection"),
    "rotate": lambda x: KT.rotate(x, _on(x.device, torch.tensor([30.0, -45.0]))),
    "resize_antialias": lambda x: KT.resize(x, (7, 9), antialias=True),
    "resize_bicubic": lambda x: KT.resize(x, (31, 11), interpolation="bicubic"),
    "crop_and_resize": lambda x: KT.crop_and_resize(x, _on(x.device, BOXES), (8, 8)),
    "pyrup": lambda x: KT.pyrup(x),
    "elastic": lambda x: KT.elastic_transform2d(
        x, _on(x.device, torch.rand(2, 2, 16, 20, generator=torch.Generator().manual_seed(3)))),
    "depth_to_normals": lambda x: KG.depth.depth_to_normals(x[:, :1] + 1,
                                                            _on(x.device, CAMERA)),
    "warp_frame_depth": lambda x: KG.depth.warp_frame_depth(
        x, x[:, :1] + 1, torch.eye(4, device=x.device).repeat(2, 1, 1) + 0.01,
        _on(x.device, CAMERA)),
}
_FEATURES = {
    "harris": lambda x: KFe.harris_response(x, 0.04),
    "gftt": lambda x: KFe.gftt_response(x),
    "hessian": lambda x: KFe.hessian_response(x),
    "sift_descriptor": lambda x: KFe.SIFTDescriptor(32, 8, 4).to(x.device)(x),
    "dominant_orientation": lambda x: KFe.PatchDominantGradientOrientation(32).to(x.device)(x),
    "affine_shape": lambda x: KFe.PatchAffineShapeEstimator(32).to(x.device)(x),
}
_POINTS = {
    "find_homography_dlt": lambda a, b: KG.homography.find_homography_dlt(a, b),
    "symmetric_transfer_error": lambda a, b: KG.homography.symmetric_transfer_error(
        a, b, _on(a.device, HOMOGRAPHY[:1])),
    "quaternion_to_rotation_matrix": lambda a, b: KCv.quaternion_to_rotation_matrix(
        KCv.normalize_quaternion(torch.cat([a[0, :5], b[0, :5]], -1))),
    "transform_points": lambda a, b: KG.transform_points(_on(a.device, HOMOGRAPHY[:1]), a),
    "unproject_points": lambda a, b: KG.camera.unproject_points(
        a, b[..., :1].abs() + 1, _on(a.device, CAMERA[:1, None])),
}
_ROTATIONS = {
    "quaternion_to_axis_angle": lambda q, v: KCv.quaternion_to_axis_angle(q),
    "axis_angle_to_rotation_matrix": lambda q, v: KCv.axis_angle_to_rotation_matrix(v),
    "rotation_matrix_round_trip": lambda q, v: KCv.rotation_matrix_to_quaternion(
        KCv.axis_angle_to_rotation_matrix(v)),
    "euler_from_quaternion": lambda q, v: torch.stack(KCv.euler_from_quaternion(
        *KCv.normalize_quaternion(q).unbind(-1)), -1),
    "se3_exp_log": lambda q, v: KG.liegroup.Se3.exp(torch.cat([v, v.flip(-1)], -1)).log(),
}
_SWEEP = ([("filters.sobel_of_blur", lambda x: KF.sobel(KF.gaussian_blur2d(x, (5, 5), (1.5, 1.5))),
            (IMG,)),
           ("geometry.warp_affine", lambda x: KT.warp_affine(x, _on(x.device, AFFINE), (16, 20)),
            (IMG,)),
           ("losses.ssim", lambda x, y: KL.ssim_loss(x, y, 5), (IMG, IMG2))]
          + [(f"filters.{k}", f, (IMG,)) for k, f in _FILTERS.items()]
          + [(f"color.{k}", f, (IMG,)) for k, f in _COLOUR.items()]
          + [(f"enhance.{k}", f, (IMG,)) for k, f in _ENHANCE.items()]
          + [(f"morphology.{k}", f, (IMG,)) for k, f in _MORPHOLOGY.items()]
          + [(f"geometry.{k}", f, (IMG,)) for k, f in _GEOMETRY.items()]
          + [(f"feature.{k}", f, (PATCHES if "_" in k else GRAY,)) for k, f in _FEATURES.items()]
          + [(f"geometry.{k}", f, (POINTS, MOVED)) for k, f in _POINTS.items()]
          + [(f"conversions.{k}", f, (QUATERNIONS, AXIS_ANGLES)) for k, f in _ROTATIONS.items()]
          + [("losses.psnr", lambda x, y: KL.psnr_loss(x, y, 1.0), (IMG, IMG2)),
             ("losses.ms_ssim", lambda x, y: KL.MS_SSIMLoss().to(x.device)(x, y),
              (torch.rand(1, 3, 64, 64, generator=_g), torch.rand(1, 3, 64, 64, generator=_g))),
             ("losses.total_variation", lambda x, y: KL.total_variation(x), (IMG, IMG2)),
             ("losses.focal", lambda x, t: KL.focal_loss(x, t, 0.5, 2.0, "mean"),
              (LOGITS, LABELS)),
             ("losses.dice", lambda x, t: KL.dice_loss(x, t), (LOGITS, LABELS)),
             ("losses.tversky", lambda x, t: KL.tversky_loss(x, t, 0.5, 0.5), (LOGITS, LABELS)),
             ("losses.lovasz_softmax", lambda x, t: KL.lovasz_softmax_loss(x, t),
              (LOGITS, LABELS))])


@pytest.mark.slow
@pytest.mark.parametrize("name,fn,inputs", _SWEEP, ids=[s[0] for s in _SWEEP])
def test_kornia_sweep_matches_cpu(name, fn, inputs):
    compare_with_gradients(fn, *inputs)


@pytest.mark.slow
@pytest.mark.parametrize("name,fn,inputs", _SWEEP[::4], ids=[s[0] for s in _SWEEP[::4]])
def test_kornia_sweep_matches_cpu_in_fused_eager(name, fn, inputs):
    with torchtpu.set_eager_mode("fused"):
        compare_with_gradients(fn, *inputs)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["filters.canny", "color.lab", "enhance.equalize",
                                  "geometry.rotate", "geometry.crop_and_resize",
                                  "feature.harris", "losses.focal"])
def test_kornia_compiled_matches_cpu(name):
    fn, inputs = next((f, i) for n, f, i in _SWEEP if n == name)
    compiled = torch.compile(fn, backend="tpu")
    compare_with_gradients(lambda *a: (fn if a[0].device.type == "cpu" else compiled)(*a), *inputs)


@pytest.mark.slow
def test_hardnet_descriptor_matches_cpu():
    torch.manual_seed(0)
    net = KFe.HardNet(pretrained=False).eval()
    compare_with_gradients(lambda x: net.to(x.device)(x), PATCHES)


_AUGMENTATIONS = [
    KA.RandomAffine(30.0, (0.1, 0.1), (0.8, 1.2), 10.0, p=1.0),
    KA.RandomPerspective(0.4, p=1.0),
    KA.RandomResizedCrop((16, 16), p=1.0),
    KA.RandomThinPlateSpline(p=1.0),
    KA.RandomElasticTransform(p=1.0),
    KA.RandomFisheye(torch.tensor([-0.3, 0.3]), torch.tensor([-0.3, 0.3]),
                     torch.tensor([0.9, 1.0]), p=1.0),
    KA.ColorJiggle(0.2, 0.3, 0.3, 0.1, p=1.0),
    KA.RandomGaussianBlur((5, 5), (0.5, 2.0), p=1.0),
    KA.RandomMotionBlur(5, 35.0, 0.5, p=1.0),
    KA.RandomErasing(p=1.0),
    KA.RandomPlanckianJitter(p=1.0),
    KA.RandomPlasmaShadow(p=1.0),
    KA.RandomJPEG(p=1.0),
    KA.RandomClahe(p=1.0),
    KA.RandomSnow(p=1.0),
]


@pytest.mark.slow
@pytest.mark.parametrize("aug", _AUGMENTATIONS, ids=[type(a).__name__ for a in _AUGMENTATIONS])
def test_augmentation_with_cpu_drawn_params_matches_cpu(aug):
    torch.manual_seed(0)
    params = aug.forward_parameters(IMG.shape)

    def apply(x):
        on = {k: v.to(x.device) if isinstance(v, torch.Tensor) else v for k, v in params.items()}
        return aug.to(x.device)(x, params=on)

    compare_with_gradients(apply, IMG)
