"""The files owrl reads and writes: flows and tasks (documents), records, task files, outputs, the report."""
