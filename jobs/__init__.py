"""GPU jobs: the model and its state machine, spec validation, actions, API and pages."""
