"""Make models the way a user would, outside infer-compare, to measure them with it
(docs/own-model.md):

    python examples/export_own_models.py --out own
    infer-compare --model own/mobilenet_v2.onnx --artifact own/mobilenet_v2.xml

Writes into --out: a small conv net (3 x 64 x 64 -> 10) as a static-batch ONNX file, a
dynamic-batch ONNX file, TorchScript (tiny.pt), an ExportedProgram (tiny.pt2) and its
factory module (tiny_factory.py); a network with two inputs and two outputs (an image
3 x 64 x 64 and a vector of 8 in; logits [N, 10] and a feature map [N, 8, 8, 8] out) as a
dynamic-batch ONNX file (two_io.onnx) and TorchScript (two_io.pt); and torchvision's MobileNet v2 as a
dynamic-batch ONNX file plus an OpenVINO IR converted from it with OpenVINO's own tools (the pre-built
artifact). No weights are downloaded: MobileNet v2 gets seeded random weights whose
BatchNorm statistics are re-estimated on scikit-image's bundled photos, so that its
outputs depend on the input (as infer-compare does for its own random-weight models).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch
import torch.nn as nn

FACTORY = '''import torch
import torch.nn as nn


class Tiny(nn.Module):
    def __init__(self):
        super().__init__()
        self.f = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                               nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 10))

    def forward(self, x):
        return self.f(x)


def tiny():
    torch.manual_seed(0)
    return Tiny().eval()
'''


class TwoInTwoOut(nn.Module):
    """image [N, 3, 64, 64] and vec [N, 8] -> logits [N, 10] and features [N, 8, 8, 8]."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Sequential(nn.Conv2d(3, 8, 3, stride=2, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(8))
        self.vec = nn.Linear(8, 8)
        self.head = nn.Linear(8 * 8 * 8, 10)

    def forward(self, image, vec):
        features = self.conv(image) + self.vec(vec)[:, :, None, None]
        return self.head(features.flatten(1)), features


def two_io(out: Path) -> None:
    torch.manual_seed(0)
    m = TwoInTwoOut().eval()
    x = (torch.randn(2, 3, 64, 64), torch.randn(2, 8))
    names = ["image", "vec", "logits", "features"]
    torch.onnx.export(m, x, str(out / "two_io.onnx"), input_names=names[:2], output_names=names[2:],
                      opset_version=17, dynamo=False, dynamic_axes={n: {0: "batch"} for n in names})
    torch.jit.save(torch.jit.script(m), str(out / "two_io.pt"))


def _photos(n: int, size: int = 224) -> torch.Tensor:
    from skimage import data
    from skimage.transform import resize

    names = ("astronaut", "chelsea", "coffee", "rocket", "cat", "hubble_deep_field", "immunohistochemistry")
    out = []
    for i in range(n):
        img = getattr(data, names[i % len(names)])()
        h, w = img.shape[:2]
        s = min(h, w) // 2 + (i * 17) % (min(h, w) // 2)
        y, x = (i * 31) % (h - s + 1), (i * 53) % (w - s + 1)
        crop = resize(img[y:y + s, x:x + s], (size, size), anti_aliasing=True)
        out.append((crop - (0.485, 0.456, 0.406)) / (0.229, 0.224, 0.225))
    return torch.tensor(__import__("numpy").stack(out).transpose(0, 3, 1, 2), dtype=torch.float32)


def mobilenet_v2() -> nn.Module:
    """Seeded random MobileNet v2 with BatchNorm statistics re-estimated on bundled photos."""
    import torchvision

    torch.manual_seed(0)
    m = torchvision.models.mobilenet_v2(weights=None)
    for mod in m.modules():
        if isinstance(mod, nn.BatchNorm2d):
            mod.reset_running_stats()
            mod.momentum = None  # a cumulative average over the calibration batches
    m.train()
    with torch.no_grad():
        x = _photos(32)
        for i in range(0, len(x), 8):
            m(x[i:i + 8])
    return m.eval()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="own", help="output folder (default ./own)")
    ap.add_argument("--skip-mobilenet", action="store_true", help="only the small network")
    a = ap.parse_args()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "tiny_factory.py").write_text(FACTORY)
    import importlib.util

    spec = importlib.util.spec_from_file_location("tiny_factory", out / "tiny_factory.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)  # the factory module itself (TorchScript needs its source)
    tiny, x = mod.tiny(), torch.randn(1, 3, 64, 64)
    torch.onnx.export(tiny, (x,), str(out / "tiny_static.onnx"), input_names=["input"],
                      output_names=["logits"], opset_version=17, dynamo=False)
    torch.onnx.export(tiny, (x,), str(out / "tiny_dyn.onnx"), input_names=["input"], output_names=["logits"],
                      opset_version=17, dynamo=False,
                      dynamic_axes={"input": {0: "batch"}, "logits": {0: "batch"}})
    torch.jit.save(torch.jit.script(tiny), str(out / "tiny.pt"))
    torch.export.save(torch.export.export(tiny, (x,)), str(out / "tiny.pt2"))
    two_io(out)
    if not a.skip_mobilenet:
        m, x = mobilenet_v2(), torch.randn(1, 3, 224, 224)
        onnx_path = out / "mobilenet_v2.onnx"
        torch.onnx.export(m, (x,), str(onnx_path), input_names=["images"], output_names=["logits"],
                          opset_version=17, dynamo=False,
                          dynamic_axes={"images": {0: "n"}, "logits": {0: "n"}})
        import openvino as ov

        ov.save_model(ov.convert_model(str(onnx_path)), str(out / "mobilenet_v2.xml"), compress_to_fp16=False)
    print("wrote", ", ".join(sorted(p.name for p in out.iterdir() if p.is_file())))


if __name__ == "__main__":
    main()
