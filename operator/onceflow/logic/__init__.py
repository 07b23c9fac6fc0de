"""Pure decisions: generation planning, rollout steps, pod planning, preflight, audit."""
