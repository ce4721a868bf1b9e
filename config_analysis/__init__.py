"""Static analysis of a user's XTuner RL config: evaluate it without executing it, then apply XTuner's validation rules."""
