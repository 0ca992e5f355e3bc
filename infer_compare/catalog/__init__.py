"""What can be compared: the runtimes (discovered from each ``backends/<runtime>/__init__.py``
declaration), the format table, the device kinds, the typed options, the optional dependencies.

Enters: nothing but names. Leaves: tables that the CLI, planning and reports read.
May import: base. The runtime declarations are found by name (importlib), never imported here statically."""
