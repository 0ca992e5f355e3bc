"""Models defined by other projects, built from their own code with no weights (tests/test_field_models.py).

``ssdlite_raw``: torchvision's SSDlite320 MobileNetV3-Large detector (weights=None,
weights_backbone=None: seeded random weights, nothing downloaded) up to its head: two outputs per
image, box regressions [N, anchors, 4] and class logits [N, anchors, 91], which is what a deployed
detector runs before decoding and NMS (those stay on the host).
"""

from __future__ import annotations


def ssdlite_raw():
    import torch
    from torchvision.models.detection import ssdlite320_mobilenet_v3_large

    torch.manual_seed(0)
    det = ssdlite320_mobilenet_v3_large(weights=None, weights_backbone=None).eval()

    class Raw(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.backbone, self.head = det.backbone, det.head

        def forward(self, images):
            feats = list(self.backbone(images).values())
            out = self.head(feats)
            return out["bbox_regression"], out["cls_logits"]

    return Raw().eval()
