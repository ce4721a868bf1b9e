"""What XTuner is and enforces, as data and pure functions: config classes, validation and resource rules, data-contract codes."""
