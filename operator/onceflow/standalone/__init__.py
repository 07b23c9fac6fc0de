"""``onceflow run``: the generation protocol on one machine, tasks as child processes."""
