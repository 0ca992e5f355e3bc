"""The user's own models (issue 10): ONNX files (static and dynamic batch, external data),
TorchScript, ExportedProgram, factories (with and without --weights), module objects, a
two-input two-output network, and every bad input as a one-line UsageError (exit code 2).
Every model is built inside its test, in tmp_path, and is tiny (16x16 inputs)."""

from __future__ import annotations

import hashlib
import inspect
import io
import json
import sys
import uuid
import warnings
import zipfile

import numpy as np
import pytest

torch = pytest.importorskip("torch")
onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
from torch import nn  # noqa: E402

from infer_compare.base.errors import UsageError  # noqa: E402
from infer_compare.models import TensorSpec, looks_like_user_model, parse_input_shapes  # noqa: E402
from infer_compare.prepare.user_model import load_user_model  # noqa: E402
from infer_compare.prepare.user_model import reference_of as reference_outputs  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore:.*is deprecated:FutureWarning")  # torch.jit in torch >= 2.10

RNG = np.random.default_rng(0)
X = RNG.standard_normal((5, 3, 16, 16)).astype(np.float32)
MASK = (RNG.standard_normal((5, 1, 16, 16)) > 0).astype(np.float32)


class Small(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.bn = nn.BatchNorm2d(4)
        self.fc = nn.Linear(4, 5)

    def forward(self, x):
        return self.fc(torch.relu(self.bn(self.conv(x))).mean((2, 3)))


class TwoInTwoOut(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.fc = nn.Linear(4, 3)

    def forward(self, image, mask):
        feat = torch.relu(self.conv(image)) * mask
        return self.fc(feat.mean((2, 3))), feat


FACTORY = '''
import torch
from torch import nn


class Tiny(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.fc = nn.Linear(4, 5)

    def forward(self, x):
        return self.fc(torch.relu(self.conv(x)).mean((2, 3)))


def build():
    torch.manual_seed(0)
    return Tiny()


def not_a_module():
    return {"weights": 1}
'''


def small(seed: int = 0) -> Small:
    torch.manual_seed(seed)
    m = Small()
    with torch.no_grad():  # non-trivial BatchNorm statistics
        m.bn.running_mean.uniform_(-0.5, 0.5)
        m.bn.running_var.uniform_(0.5, 2.0)
    return m.eval()


def run_torch(model, *arrays):
    with torch.no_grad():
        return model(*[torch.from_numpy(a) for a in arrays])


def export_onnx(model, args, path, inputs, outputs, dynamic: bool) -> None:
    kw = {"dynamo": False} if "dynamo" in inspect.signature(torch.onnx.export).parameters else {}
    axes = {n: {0: "batch"} for n in inputs + outputs} if dynamic else None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, args, str(path), input_names=inputs, output_names=outputs, dynamic_axes=axes,
                          opset_version=17, **kw)


def usage_error(fn, *args, **kw) -> str:
    """The UsageError's message, checked to be one line with exit code 2."""
    with pytest.raises(UsageError) as info:
        fn(*args, **kw)
    msg = str(info.value)
    assert msg and "\n" not in msg and info.value.exit_code == 2
    return msg


def sha(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


needs_export = pytest.mark.skipif(not hasattr(torch, "export") or not hasattr(torch.export, "save"),
                                  reason="torch.export is not in this torch")


# ---------------------------------------------------------------- parsing


def test_parse_input_shapes():
    assert parse_input_shapes("1x3x224x224") == {None: (1, 3, 224, 224)}
    assert parse_input_shapes("image:1x3x224x224, mask:1X1x224x224") == {"image": (1, 3, 224, 224),
                                                                          "mask": (1, 1, 224, 224)}
    assert parse_input_shapes("input:0:1x3x8x8") == {"input:0": (1, 3, 8, 8)}  # TF-style names keep their ':'
    for bad in ("", "1x3xax4", "1x3,1x3", "x:0x3", "x:1x2,x:1x2", "1x3x", "x:1x3,,y:1x3"):
        usage_error(parse_input_shapes, bad)


def test_looks_like_user_model(tmp_path):
    f = tmp_path / "weird_name"
    f.write_bytes(b"x")
    for ref in ("model.onnx", "net.PT2", "a/b.pth", "./m", "pkg.mod:build", "mod:Class.make", str(f)):
        assert looks_like_user_model(ref), ref
    for ref in ("resnet50", "lenet5", "mobilenet_v3_large", "LeNet-5", "squeezenet1_0", ""):
        assert not looks_like_user_model(ref), ref
    assert looks_like_user_model(Small())


# ---------------------------------------------------------------- ONNX


def test_onnx_static_batch(tmp_path):
    m = small()
    path = tmp_path / "net.onnx"
    export_onnx(m, (torch.zeros(1, 3, 16, 16),), path, ["x"], ["logits"], dynamic=False)
    um = load_user_model(str(path))
    assert (um.kind, um.name, um.module, um.static_batch) == ("onnx", "net", None, 1)
    assert um.inputs == (TensorSpec("x", (1, 3, 16, 16), "float32"),)
    assert um.outputs == (TensorSpec("logits", (1, 5), "float32"),)
    assert um.sha256 == sha(path)
    assert um.example_inputs(1)["x"].shape == (1, 3, 16, 16)
    assert "static batch 1" in usage_error(um.example_inputs, 8)
    ref = reference_outputs(um, {"x": X}, batch=16)  # five batch-1 runs
    np.testing.assert_allclose(ref["logits"], run_torch(m, X).numpy(), rtol=1e-4, atol=1e-5)
    assert any("ONNX Runtime" in n for n in um.notes)
    json.dumps(um.as_dict())

    two = tmp_path / "two.onnx"  # static batch 2: five samples, the last chunk padded
    export_onnx(m, (torch.zeros(2, 3, 16, 16),), two, ["x"], ["logits"], dynamic=False)
    um2 = load_user_model(str(two))
    assert um2.static_batch == 2
    np.testing.assert_allclose(reference_outputs(um2, {"x": X})["logits"], ref["logits"], rtol=1e-4,
                               atol=1e-5)


def test_onnx_dynamic_batch(tmp_path):
    m = small()
    path = tmp_path / "dyn.onnx"
    export_onnx(m, (torch.zeros(2, 3, 16, 16),), path, ["x"], ["logits"], dynamic=True)
    um = load_user_model(path)
    assert um.static_batch is None
    assert um.inputs == (TensorSpec("x", ("batch", 3, 16, 16), "float32"),)
    assert um.outputs[0].shape == ("batch", 5)
    assert um.example_inputs(7)["x"].shape == (7, 3, 16, 16)
    ref = reference_outputs(um, {"x": X.astype(np.float64)}, batch=2)  # chunks 2, 2, 1; float64 cast
    assert ref["logits"].shape == (5, 5)
    np.testing.assert_allclose(ref["logits"], run_torch(m, X).numpy(), rtol=1e-4, atol=1e-5)


def test_onnx_external_data(tmp_path):
    m = small()
    plain = tmp_path / "plain.onnx"
    export_onnx(m, (torch.zeros(2, 3, 16, 16),), plain, ["x"], ["logits"], dynamic=True)
    ext = tmp_path / "ext.onnx"
    onnx.save_model(onnx.load(str(plain)), str(ext), save_as_external_data=True, all_tensors_to_one_file=True,
                    location="ext.onnx.data", size_threshold=0)
    sidecar = tmp_path / "ext.onnx.data"
    assert sidecar.stat().st_size > 0
    um = load_user_model(str(ext))
    assert um.sha256 not in (sha(ext), sha(plain), "")
    assert any("ext.onnx.data" in n for n in um.notes)
    np.testing.assert_allclose(reference_outputs(um, {"x": X})["logits"], run_torch(m, X).numpy(),
                               rtol=1e-4, atol=1e-5)
    data = bytearray(sidecar.read_bytes())
    data[0] ^= 1
    sidecar.write_bytes(bytes(data))
    assert load_user_model(str(ext)).sha256 != um.sha256  # the sidecar is part of the content hash
    sidecar.unlink()
    assert "ext.onnx.data" in usage_error(load_user_model, str(ext))


# ---------------------------------------------------------------- torch files


@needs_export
def test_torchscript_and_exported_program_match_the_module(tmp_path):
    m = small()
    expected = run_torch(m, X).numpy()
    ts = tmp_path / "net.pt"
    torch.jit.save(torch.jit.script(m), str(ts))
    pt2 = tmp_path / "net.pt2"
    ep = torch.export.export(m, (torch.zeros(2, 3, 16, 16),),
                             dynamic_shapes=({0: torch.export.Dim("batch")},))
    torch.export.save(ep, str(pt2))
    a = load_user_model(str(ts), input_shapes=parse_input_shapes("1x3x16x16"))
    b = load_user_model(str(pt2))  # shapes and dtypes from the program itself
    assert (a.kind, b.kind) == ("torchscript", "exported_program")
    for um, path in ((a, ts), (b, pt2)):
        assert um.inputs == (TensorSpec("x", ("batch", 3, 16, 16), "float32"),)
        assert um.outputs == (TensorSpec("output", ("batch", 5), "float32"),)
        assert um.static_batch is None and um.sha256 == sha(path) and um.name == "net"
        np.testing.assert_allclose(reference_outputs(um, {"x": X}, batch=2)["output"], expected,
                                   rtol=1e-4, atol=1e-5)
    assert not a.module.training
    assert "--input-shape" in usage_error(load_user_model, str(ts))  # TorchScript does not carry its shape

    static = tmp_path / "static.pt2"  # exported without dynamic shapes: a static batch of 2
    torch.export.save(torch.export.export(m, (torch.zeros(2, 3, 16, 16),)), str(static))
    su = load_user_model(str(static))
    assert su.static_batch == 2 and su.inputs[0].shape == (2, 3, 16, 16)
    np.testing.assert_allclose(reference_outputs(su, {"x": X})["output"], expected, rtol=1e-4, atol=1e-5)


def write_factory(tmp_path, monkeypatch, text: str = FACTORY) -> str:
    """A factory module in tmp_path, found through the current directory only."""
    name = f"user_factory_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{name}.py").write_text(text)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", ".", str(tmp_path))])
    return name


def test_factory_with_and_without_weights(tmp_path, monkeypatch):
    name = write_factory(tmp_path, monkeypatch)
    shapes = parse_input_shapes("1x3x16x16")
    um = load_user_model(f"{name}:build", input_shapes=shapes)
    assert (um.kind, um.name, um.sha256, um.static_batch) == ("factory", "build", "", None)
    assert um.inputs == (TensorSpec("x", ("batch", 3, 16, 16), "float32"),) and um.weights_hash
    assert not um.module.training
    own = reference_outputs(um, {"x": X})["output"]
    np.testing.assert_allclose(own, run_torch(um.module, X).numpy(), rtol=1e-5, atol=1e-6)

    factory = sys.modules[name]
    torch.manual_seed(1)
    other = factory.Tiny().eval()
    weights = tmp_path / "w.pt"
    torch.save(other.state_dict(), weights)
    wu = load_user_model(f"{name}:build", weights=str(weights), input_shapes=shapes)
    assert wu.sha256 == sha(weights) and wu.weights_hash != um.weights_hash
    got = reference_outputs(wu, {"x": X})["output"]
    np.testing.assert_allclose(got, run_torch(other, X).numpy(), rtol=1e-4, atol=1e-5)
    assert not np.allclose(got, own)

    renamed = {("head." + k if k.startswith("fc.") else k): v for k, v in other.state_dict().items()}
    torch.save(renamed, tmp_path / "renamed.pt")
    msg = usage_error(load_user_model, f"{name}:build", weights=str(tmp_path / "renamed.pt"),
                      input_shapes=shapes)
    assert "missing key 'fc.weight'" in msg
    wrong = dict(other.state_dict(), **{"fc.weight": torch.zeros(7, 4)})
    torch.save(wrong, tmp_path / "wrong.pt")
    assert "fc.weight" in usage_error(load_user_model, f"{name}:build", weights=str(tmp_path / "wrong.pt"),
                                      input_shapes=shapes)


# ---------------------------------------------------------------- several inputs and outputs


def test_two_inputs_two_outputs(tmp_path):
    torch.manual_seed(0)
    m = TwoInTwoOut().eval()
    logits, feat = (t.numpy() for t in run_torch(m, X, MASK))
    feed = {"image": X, "mask": MASK}

    path = tmp_path / "two.onnx"
    export_onnx(m, (torch.zeros(2, 3, 16, 16), torch.ones(2, 1, 16, 16)), path, ["image", "mask"],
                ["logits", "features"], dynamic=True)
    ou = load_user_model(str(path))
    assert [s.name for s in ou.inputs] == ["image", "mask"]
    assert [(s.name, s.shape) for s in ou.outputs] == [("logits", ("batch", 3)),
                                                       ("features", ("batch", 4, 16, 16))]
    ref = reference_outputs(ou, feed, batch=2)
    np.testing.assert_allclose(ref["logits"], logits, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(ref["features"], feat, rtol=1e-4, atol=1e-5)
    assert "image" in usage_error(load_user_model, str(path), input_shapes={None: (1, 3, 16, 16)})

    ts = tmp_path / "two.pt"
    torch.jit.save(torch.jit.script(m), str(ts))
    tu = load_user_model(str(ts), input_shapes=parse_input_shapes("mask:1x1x16x16,image:1x3x16x16"))
    mu = load_user_model(m, example_input=(torch.zeros(2, 3, 16, 16), torch.ones(2, 1, 16, 16)))
    assert (mu.kind, mu.source, mu.sha256, mu.name) == ("module", "<python object>", "", "TwoInTwoOut")
    for um in (tu, mu):
        assert [s.name for s in um.inputs] == ["image", "mask"]
        assert [(s.name, s.shape) for s in um.outputs] == [("output_0", ("batch", 3)),
                                                           ("output_1", ("batch", 4, 16, 16))]
        ref = reference_outputs(um, feed, batch=3)
        np.testing.assert_allclose(ref["output_0"], logits, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(ref["output_1"], feat, rtol=1e-5, atol=1e-6)
    assert "mask" in usage_error(reference_outputs, mu, {"image": X})
    assert "example_input" in usage_error(load_user_model, m)


# ---------------------------------------------------------------- bad input


def test_missing_file_and_unsupported_suffix(tmp_path):
    assert "not found" in usage_error(load_user_model, str(tmp_path / "absent.onnx"))
    h5 = tmp_path / "model.h5"
    h5.write_bytes(b"\x89HDF\r\n")
    msg = usage_error(load_user_model, str(h5))
    assert "'.h5'" in msg and ".onnx" in msg and ".pt2" in msg


def test_truncated_onnx_names_the_checkers_reason(tmp_path):
    full = tmp_path / "full.onnx"
    export_onnx(small(), (torch.zeros(1, 3, 16, 16),), full, ["x"], ["y"], dynamic=False)
    cut = tmp_path / "cut.onnx"
    data = full.read_bytes()
    cut.write_bytes(data[: len(data) // 2])
    msg = usage_error(load_user_model, str(cut))
    assert "not a valid ONNX file: " in msg and len(msg.split("not a valid ONNX file: ")[1]) > 5


def write_marker(path: str) -> None:  # what a malicious pickle would run
    with open(path, "w") as f:
        f.write("ran")


class Evil:
    def __init__(self, marker: str):
        self.marker = marker

    def __reduce__(self):
        return (write_marker, (self.marker,))


def test_pickled_whole_model_is_refused_unread(tmp_path):
    marker = tmp_path / "marker"
    evil = tmp_path / "evil.pt"
    torch.save(Evil(str(marker)), evil)
    msg = usage_error(load_user_model, str(evil))
    assert "refusing to unpickle" in msg and "write_marker" in msg and "torch.jit.save" in msg
    whole = tmp_path / "whole.pth"
    torch.save(small(), whole)
    assert "Small" in usage_error(load_user_model, str(whole))
    assert not marker.exists()
    torch.load(evil, weights_only=False)  # the control: full unpickling does run it
    assert marker.exists()


@needs_export
def test_exported_program_never_fully_unpickles(tmp_path):
    """torch.export.load falls back to weights_only=False on its example inputs; not here."""
    good = tmp_path / "good.pt2"
    torch.export.save(torch.export.export(small(), (torch.zeros(2, 3, 16, 16),)), str(good))
    marker = tmp_path / "marker"
    payload = io.BytesIO()
    torch.save(Evil(str(marker)), payload)
    bad = tmp_path / "bad.pt2"
    with zipfile.ZipFile(good) as src, zipfile.ZipFile(bad, "w") as dst:
        names = [n for n in src.namelist() if "sample_inputs" in n]
        if not names:
            pytest.skip("this torch writes no sample inputs into .pt2 files")
        for n in src.namelist():
            dst.writestr(n, payload.getvalue() if n in names else src.read(n))
    assert "unpickle" in usage_error(load_user_model, str(bad))
    assert not marker.exists()
    # control
    assert torch.load(io.BytesIO(payload.getvalue()), weights_only=False) is None and marker.exists()


def test_state_dict_is_explained(tmp_path):
    path = tmp_path / "weights.pth"
    torch.save(small().state_dict(), path)
    msg = usage_error(load_user_model, str(path))
    assert "state dict" in msg and "package.module:factory --weights" in msg


def test_bad_callables(tmp_path, monkeypatch):
    name = write_factory(tmp_path, monkeypatch)
    assert "cannot import module 'no_such_pkg_q7.models'" in usage_error(load_user_model,
                                                                         "no_such_pkg_q7.models:build")
    broken = write_factory(tmp_path, monkeypatch, "raise RuntimeError('boom at import')\n")
    assert "boom at import" in usage_error(load_user_model, f"{broken}:build")
    assert "has no attribute 'nope'" in usage_error(load_user_model, f"{name}:nope")
    msg = usage_error(load_user_model, f"{name}:not_a_module", input_shapes={None: (1, 3, 16, 16)})
    assert "returned dict" in msg and "torch.nn.Module" in msg


def dynamic_hw_onnx(path) -> None:
    """x[N, 3, H, W] -> GlobalAveragePool -> y[N, 3, 1, 1], opset 17, made with onnx.helper."""
    h = onnx.helper
    x = h.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["N", 3, "H", "W"])
    y = h.make_tensor_value_info("y", onnx.TensorProto.FLOAT, ["N", 3, 1, 1])
    graph = h.make_graph([h.make_node("GlobalAveragePool", ["x"], ["y"])], "g", [x], [y])
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])
    model.ir_version = 8  # what ONNX Runtime reads, whatever this onnx writes by default
    onnx.save(model, str(path))


def test_dynamic_dimension_needs_a_size(tmp_path):
    path = tmp_path / "hw.onnx"
    dynamic_hw_onnx(path)
    msg = usage_error(load_user_model, str(path))
    assert "input 'x'" in msg and "dimension 2" in msg and "--input-shape" in msg
    um = load_user_model(str(path), input_shapes=parse_input_shapes("x:1x3x8x8"))
    assert um.inputs == (TensorSpec("x", ("batch", 3, 8, 8), "float32"),) and um.static_batch is None
    x = RNG.standard_normal((3, 3, 8, 8)).astype(np.float32)
    np.testing.assert_allclose(reference_outputs(um, {"x": x})["y"], x.mean((2, 3), keepdims=True), atol=1e-6)


def test_input_shape_that_does_not_match(tmp_path):
    m = small()
    path = tmp_path / "net.onnx"
    export_onnx(m, (torch.zeros(1, 3, 16, 16),), path, ["x"], ["y"], dynamic=False)
    msg = usage_error(load_user_model, str(path), input_shapes={None: (1, 3, 32, 32)})
    assert "input 'x'" in msg and "does not match" in msg
    assert "input 'x'" in usage_error(load_user_model, str(path), input_shapes={None: (1, 3, 16)})
    msg = usage_error(load_user_model, str(path), input_shapes={"img": (1, 3, 16, 16)})
    assert "'img'" in msg and "its inputs: x" in msg
    ts = tmp_path / "net.pt"
    torch.jit.save(torch.jit.script(m), str(ts))
    msg = usage_error(load_user_model, str(ts), input_shapes={None: (1, 4, 16, 16)})
    assert "'x' 1x4x16x16" in msg and "fails" in msg
    assert "'x'" in usage_error(reference_outputs, load_user_model(str(path)), {"x": X[:, :, :8]})
