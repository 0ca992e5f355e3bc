"""Install hints (catalog/deps.py): what a user is told to install where a library is missing."""

from __future__ import annotations


def test_install_hints_name_what_an_index_has_not_the_unpublished_package():
    """infer-compare is not on a package index: a hint says the extra's own requirements, as the installed
    package declares them (nested extras expanded), never ``pip install 'infer-compare[extra]'``."""
    from infer_compare.catalog import deps

    assert deps.extra_requirements("openvino") == ("openvino>=2024.0", "nncf>=2.10")
    assert "litert-torch>=0.10" in deps.extra_requirements("tflite-onnx")  # via [tflite-export]
    assert deps.installable("pip install 'infer-compare[fleet]'") == "pip install 'ray>=2.60'"
    assert deps.installable("pip install 'infer-compare[nosuch]'") == "pip install 'infer-compare[nosuch]'"
    for module in ("onnxruntime", "openvino", "nncf", "torch", "ai_edge_litert", "matplotlib", "sklearn"):
        assert "infer-compare[" not in deps.hint(module), (module, deps.hint(module))
    assert deps.hint("openvino").startswith("pip install 'openvino>=2024.0' 'nncf>=2.10'")
