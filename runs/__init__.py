"""Reading what a running or finished XTuner RL run writes: progress, tracker scalars, trajectories, logs."""
