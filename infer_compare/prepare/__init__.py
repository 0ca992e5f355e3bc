"""Before measuring: the model (built-in, the user's own, several inputs, a TFLite file), its
inputs and its FP32 reference outputs.

Enters: a model name, file, factory or module, and the data options. Leaves: a Prepared.
May import: artifacts, backends, models, data, parity, host, catalog, base."""
