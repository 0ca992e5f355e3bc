"""Outputs against the reference: what each output means (kinds), class scores, values, and
where a failed ONNX row first diverges.

Enters: a row's outputs and the reference outputs. Leaves: ParityResult records.
May import: host, catalog, base."""
